package blocklab.jmeter;

import java.io.File;
import java.io.PrintStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.atomic.LongAdder;

import org.apache.jmeter.JMeter;
import org.apache.jmeter.control.LoopController;
import org.apache.jmeter.engine.StandardJMeterEngine;
import org.apache.jmeter.engine.util.NoThreadClone;
import org.apache.jmeter.protocol.http.sampler.HTTPSamplerProxy;
import org.apache.jmeter.reporters.ResultCollector;
import org.apache.jmeter.samplers.SampleEvent;
import org.apache.jmeter.samplers.SampleListener;
import org.apache.jmeter.samplers.SampleResult;
import org.apache.jmeter.samplers.SampleSaveConfiguration;
import org.apache.jmeter.testelement.AbstractTestElement;
import org.apache.jmeter.testelement.TestPlan;
import org.apache.jmeter.threads.AbstractThreadGroup;
import org.apache.jmeter.threads.ThreadGroup;
import org.apache.jmeter.util.JMeterUtils;
import org.apache.jorphan.collections.HashTree;
import org.apache.jorphan.collections.ListedHashTree;

/**
 * The JMeter client of the Spring Web vs WebFlux study, headless: one thread group of
 * N threads started together (ramp-up 0), each sending exactly one GET (loop count 1)
 * with JMeter's HttpClient4 sampler, the results written as a CSV JTL.
 *
 * <pre>
 * Client --url URL --threads N --jtl FILE [--timeout-ms 60000] [--connect-timeout-ms 30000]
 * </pre>
 *
 * The JMeter home (bin/jmeter.properties, bin/saveservice.properties) is the one the
 * build unpacked from ApacheJMeter_config, passed as the system property
 * {@code blocklab.jmeter.home}. Exit 0 when the run completed (failed samples are
 * data), 2 for a bad command line, 1 for an internal failure.
 */
public final class Client {

    private static final String USAGE =
            "usage: run OUT --url http://HOST:PORT/PATH[?QUERY] --threads N --jtl FILE"
                    + " [--timeout-ms 60000] [--connect-timeout-ms 30000]";

    /** What the command line asks for. */
    record Options(URI url, int threads, Path jtl, int timeoutMs, int connectTimeoutMs) {}

    /** A bad command line: one line on stderr, exit 2. */
    static final class Usage extends Exception {
        Usage(String message) {
            super(message);
        }
    }

    public static void main(String[] args) {
        Options options;
        try {
            options = parse(args);
        } catch (Usage e) {
            System.err.println(e.getMessage() == null ? USAGE : "jmeter: " + e.getMessage() + " (" + USAGE + ")");
            System.exit(2);
            return;
        }
        int status;
        try {
            status = run(options);
        } catch (Throwable e) {
            System.err.println("jmeter: internal failure: " + e);
            status = 1;
        }
        // JMeter may leave non-daemon threads behind (timers, connection monitors).
        System.exit(status);
    }

    static Options parse(String[] args) throws Usage {
        String url = null;
        String jtl = null;
        Integer threads = null;
        int timeoutMs = 60_000;
        int connectTimeoutMs = 30_000;
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("-h") || flag.equals("--help")) {
                throw new Usage(null);
            }
            if (i + 1 >= args.length) {
                throw new Usage("missing value after " + flag);
            }
            String value = args[++i];
            switch (flag) {
                case "--url" -> url = value;
                case "--jtl" -> jtl = value;
                case "--threads" -> threads = positive(flag, value);
                case "--timeout-ms" -> timeoutMs = positive(flag, value);
                case "--connect-timeout-ms" -> connectTimeoutMs = positive(flag, value);
                default -> throw new Usage("unknown argument " + flag);
            }
        }
        if (url == null) {
            throw new Usage("--url is required");
        }
        if (threads == null) {
            throw new Usage("--threads is required");
        }
        if (jtl == null) {
            throw new Usage("--jtl is required");
        }
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new Usage("bad --url " + url + ": " + e.getReason());
        }
        if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())) {
            throw new Usage("--url must be http:// or https://, not " + url);
        }
        if (uri.getHost() == null) {
            throw new Usage("--url has no host: " + url);
        }
        return new Options(uri, threads, Path.of(jtl).toAbsolutePath(), timeoutMs, connectTimeoutMs);
    }

    private static int positive(String flag, String value) throws Usage {
        try {
            int n = Integer.parseInt(value);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new Usage(flag + " wants a positive integer, not " + value);
    }

    static int run(Options options) throws Exception {
        String home = System.getProperty("blocklab.jmeter.home");
        if (home == null || !new File(home, "bin/jmeter.properties").isFile()) {
            System.err.println("jmeter: no JMeter home at " + home + " (is the peer built?)");
            return 1;
        }
        // stdout is the summary line only: what JMeter prints there itself (its
        // reportErrorToUser, headless) goes to stderr.
        PrintStream stdout = System.out;
        System.setOut(System.err);

        // JMeter's non-GUI setup: its home, its properties, its locale.
        System.setProperty(JMeter.JMETER_NON_GUI, "true");
        JMeterUtils.setJMeterHome(home);
        JMeterUtils.loadJMeterProperties(new File(home, "bin/jmeter.properties").getPath());
        JMeterUtils.initLocale();

        // ResultCollector appends to an existing file (and then writes no header).
        Files.deleteIfExists(options.jtl());
        Path parent = options.jtl().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }

        Tally tally = new Tally();
        HashTree plan = plan(options, tally);

        StandardJMeterEngine engine = new StandardJMeterEngine();
        engine.configure(plan);
        engine.run(); // in this thread; returns when every thread has ended

        long samples = tally.samples.sum();
        long ok = tally.ok.sum();
        if (samples == 0) {
            stdout.println("jmeter: 0 samples");
        } else {
            stdout.printf("jmeter: %d samples, %d ok, min %d ms, max %d ms%n",
                    samples, ok, tally.min.get(), tally.max.get());
        }
        stdout.flush();
        if (samples != options.threads()) {
            System.err.printf("jmeter: internal failure: %d threads asked, %d samples taken%n",
                    options.threads(), samples);
            return 1;
        }
        // ResultCollector logs a file it cannot write and goes on: that is a failure here.
        if (!Files.isRegularFile(options.jtl()) || Files.size(options.jtl()) == 0) {
            System.err.println("jmeter: internal failure: no JTL written at " + options.jtl());
            return 1;
        }
        return 0;
    }

    /** TestPlan → { ResultCollector, Tally, ThreadGroup → HTTP sampler }. */
    static HashTree plan(Options options, Tally tally) {
        URI url = options.url();

        HTTPSamplerProxy get = new HTTPSamplerProxy();
        get.setName("GET " + (url.getRawPath() == null || url.getRawPath().isEmpty() ? "/" : url.getRawPath()));
        get.setImplementation("HttpClient4");
        get.setMethod("GET");
        get.setProtocol(url.getScheme());
        get.setDomain(url.getHost());
        get.setPort(url.getPort() != -1 ? url.getPort() : "https".equals(url.getScheme()) ? 443 : 80);
        get.setPath(url.getRawPath() == null || url.getRawPath().isEmpty() ? "/" : url.getRawPath());
        // The query goes in as sampler arguments, not inside the path: that is how the
        // GUI holds it ("Parameters"), and JMeter builds the query string from them.
        for (String[] pair : query(url.getRawQuery())) {
            get.addArgument(pair[0], pair[1]);
        }
        get.setFollowRedirects(true);
        get.setUseKeepAlive(false); // one request per thread
        get.setConnectTimeout(Integer.toString(options.connectTimeoutMs()));
        get.setResponseTimeout(Integer.toString(options.timeoutMs()));

        LoopController once = new LoopController();
        once.setLoops(1);
        once.setContinueForever(false);

        ThreadGroup group = new ThreadGroup();
        group.setName("clients");
        group.setNumThreads(options.threads());
        group.setRampUp(0);
        group.setScheduler(false);
        group.setProperty(ThreadGroup.DELAYED_START, false);
        group.setProperty(AbstractThreadGroup.ON_SAMPLE_ERROR, AbstractThreadGroup.ON_SAMPLE_ERROR_CONTINUE);
        group.setSamplerController(once);

        ResultCollector jtl = new ResultCollector();
        jtl.setName("jtl");
        jtl.setFilename(options.jtl().toString());
        jtl.setSaveConfig(csvColumns());

        TestPlan testPlan = new TestPlan("blocklab jmeter client");
        testPlan.setSerialized(false);
        testPlan.setFunctionalMode(false);

        HashTree tree = new ListedHashTree();
        HashTree planTree = tree.add(testPlan);
        planTree.add(jtl);
        planTree.add(tally);
        planTree.add(group).add(get);
        return tree;
    }

    /** The query's name=value pairs, decoded (JMeter encodes them again). */
    static List<String[]> query(String rawQuery) {
        List<String[]> pairs = new ArrayList<>();
        if (rawQuery == null || rawQuery.isEmpty()) {
            return pairs;
        }
        for (String part : rawQuery.split("&")) {
            if (part.isEmpty()) {
                continue;
            }
            int eq = part.indexOf('=');
            String name = eq < 0 ? part : part.substring(0, eq);
            String value = eq < 0 ? "" : part.substring(eq + 1);
            pairs.add(new String[] {
                URLDecoder.decode(name, StandardCharsets.UTF_8),
                URLDecoder.decode(value, StandardCharsets.UTF_8)});
        }
        return pairs;
    }

    /**
     * JMeter's standard CSV columns (its defaults in jmeter.properties), set here so
     * that no property changes them: timeStamp (epoch ms), elapsed, label,
     * responseCode, responseMessage, threadName, dataType, success, failureMessage,
     * bytes, sentBytes, grpThreads, allThreads, URL, Latency, IdleTime, Connect.
     */
    static SampleSaveConfiguration csvColumns() {
        SampleSaveConfiguration c = new SampleSaveConfiguration(false);
        c.setAsXml(false);
        c.setFieldNames(true);
        c.setDelimiter(",");
        c.setDateFormat(null); // epoch milliseconds
        c.setTimestamp(true);
        c.setTime(true);
        c.setLabel(true);
        c.setCode(true);
        c.setMessage(true);
        c.setThreadName(true);
        c.setDataType(true);
        c.setSuccess(true);
        c.setAssertionResultsFailureMessage(true);
        c.setBytes(true);
        c.setSentBytes(true);
        c.setThreadCounts(true);
        c.setUrl(true);
        c.setLatency(true);
        c.setIdleTime(true);
        c.setConnectTime(true);
        return c;
    }

    /**
     * Counts the samples for the summary line; one instance shared by all threads
     * (NoThreadClone), as JMeter does with its own listeners.
     */
    public static final class Tally extends AbstractTestElement implements SampleListener, NoThreadClone {
        private static final long serialVersionUID = 1L;
        final transient LongAdder samples = new LongAdder();
        final transient LongAdder ok = new LongAdder();
        final transient LongAccumulator min = new LongAccumulator(Math::min, Long.MAX_VALUE);
        final transient LongAccumulator max = new LongAccumulator(Math::max, Long.MIN_VALUE);

        public Tally() {
            setName("tally");
        }

        @Override
        public void sampleOccurred(SampleEvent event) {
            SampleResult result = event.getResult();
            samples.increment();
            if (result.isSuccessful()) {
                ok.increment();
            }
            min.accumulate(result.getTime());
            max.accumulate(result.getTime());
        }

        @Override
        public void sampleStarted(SampleEvent event) {
            // not used
        }

        @Override
        public void sampleStopped(SampleEvent event) {
            // not used
        }
    }
}
