package blocklab.ceiling;

import java.net.URI;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.logging.Level;

import org.neo4j.driver.AuthToken;
import org.neo4j.driver.AuthTokens;
import org.neo4j.driver.Config;
import org.neo4j.driver.Driver;
import org.neo4j.driver.GraphDatabase;
import org.neo4j.driver.Logging;
import org.neo4j.driver.Record;
import org.neo4j.driver.Values;
import org.neo4j.driver.async.AsyncSession;
import org.neo4j.driver.async.ResultCursor;

/**
 * Neo4j's ceiling for blocklab's one-node read: C reads kept in flight through the Java
 * driver's async API (no HTTP, no server), each a fresh async session running
 * {@code MATCH (n:Content {id: $id}) RETURN n} for a random id in 1..=N, exactly the read
 * of the servers under test. Each completed read starts the next one at once (closed loop).
 * After the warm-up the counters are reset; a read counts when it completes inside the
 * measured window. Prints one JSON line on stdout; progress on stderr.
 */
public final class Ceiling {
    static final String QUERY = "MATCH (n:Content {id: $id}) RETURN n";
    static final String DRIVER = "neo4j-java-driver 4.4.20";

    /** Latencies in whole µs, one bin per µs up to ~1 s; longer ones land in the last bin. */
    static final int BINS = 1 << 20;

    private final Driver driver;
    private final int nodes;
    private final AtomicLongArray histogram = new AtomicLongArray(BINS);
    private final AtomicLong reads = new AtomicLong();
    private final AtomicLong errors = new AtomicLong();
    private final AtomicLong wrong = new AtomicLong();
    private final AtomicLong maxMicros = new AtomicLong();
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean recording;
    private volatile boolean stopping;
    private volatile String firstError;
    private volatile CountDownLatch drained;

    private Ceiling(Driver driver, int nodes) {
        this.driver = driver;
        this.nodes = nodes;
    }

    public static void main(String[] args) throws Exception {
        Options o;
        try {
            o = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("neo4j-ceiling: " + e.getMessage() + " (" + Options.USAGE + ")");
            System.exit(2);
            return;
        }
        Config config = Config.builder()
                .withMaxConnectionPoolSize(Math.max(o.concurrency, 1))
                .withConnectionAcquisitionTimeout(30, TimeUnit.SECONDS)
                .withLogging(Logging.console(Level.WARNING))
                .build();
        Driver driver = GraphDatabase.driver(o.db, authFromEnvironment(), config);
        int status = 0;
        try {
            try {
                driver.verifyConnectivity();
            } catch (RuntimeException e) {
                System.err.println("neo4j-ceiling: cannot reach " + o.db + ": " + e.getMessage());
                System.exit(1);
            }
            Ceiling ceiling = new Ceiling(driver, o.nodes);
            if (o.stdin) {
                status = ceiling.serveStdin(o);
            } else {
                status = ceiling.measure(o);
            }
        } finally {
            driver.closeAsync().toCompletableFuture().get(10, TimeUnit.SECONDS);
        }
        System.exit(status);
    }

    /**
     * The database's credentials, as blocklab reads them for itself: {@code NEO4J_PASSWORD}
     * with {@code NEO4J_USER} (default {@code neo4j}), or none when no password is set. From the
     * environment only: a command line is public ({@code ps}, {@code /proc/PID/cmdline}).
     */
    static AuthToken authFromEnvironment() {
        String password = System.getenv("NEO4J_PASSWORD");
        if (password == null) {
            return AuthTokens.none();
        }
        String user = System.getenv("NEO4J_USER");
        return AuthTokens.basic(user == null ? "neo4j" : user, password);
    }

    /**
     * {@code text} with everything between a URL's {@code ://} and its last {@code @}
     * replaced by {@code ***}: a user and a password, even one holding a '/' or a space.
     * Without a scheme, everything before the last '@'.
     */
    static String redacted(String text) {
        int at = text.lastIndexOf('@');
        if (at < 0) {
            return text;
        }
        int scheme = text.indexOf("://");
        int from = scheme >= 0 && scheme < at ? scheme + 3 : 0;
        return text.substring(0, from) + "***" + text.substring(at);
    }

    /**
     * --stdin: one JVM (and one driver pool) for many measurements, so that the client is as
     * warm as the database. Each line "SECONDS WARMUP" on stdin runs one measurement and
     * prints its JSON line; EOF or "quit" ends. Between measurements no read is in flight.
     */
    private int serveStdin(Options o) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
        System.err.println("neo4j-ceiling: ready (stdin: SECONDS WARMUP per measurement)");
        int status = 0;
        for (String line; (line = in.readLine()) != null; ) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            String[] parts = line.split("\\s+");
            try {
                o.seconds = Double.parseDouble(parts[0]);
                o.warmup = parts.length > 1 ? Double.parseDouble(parts[1]) : 0;
            } catch (NumberFormatException e) {
                System.err.println("neo4j-ceiling: stdin: expected SECONDS [WARMUP], got: " + line);
                status = 2;
                continue;
            }
            status = Math.max(status, measure(o));
        }
        return status;
    }

    private int measure(Options o) throws InterruptedException {
        long cpu0 = cpuNanos();
        stopping = false;
        recording = false;
        drained = new CountDownLatch(1);
        reset();
        inFlight.set(o.concurrency);
        for (int i = 0; i < o.concurrency; i++) {
            next();
        }
        if (o.warmup > 0) {
            System.err.printf(Locale.ROOT, "neo4j-ceiling: warming up %.1f s with %d reads in flight%n",
                    o.warmup, o.concurrency);
            sleepSeconds(o.warmup);
        }
        reset();
        long cpuStart = cpuNanos();
        long start = System.nanoTime();
        recording = true;
        System.err.printf(Locale.ROOT, "neo4j-ceiling: measuring %.1f s%n", o.seconds);
        sleepSeconds(o.seconds);
        recording = false;
        long elapsed = System.nanoTime() - start;
        long cpuEnd = cpuNanos();
        stopping = true;
        boolean clean = drained.await(30, TimeUnit.SECONDS);

        long n = reads.get();
        double secs = elapsed / 1e9;
        StringBuilder out = new StringBuilder(512);
        out.append('{');
        field(out, "tool", "\"neo4j-ceiling\"");
        field(out, "driver", "\"" + DRIVER + " (async API, pool " + o.concurrency + ")\"");
        field(out, "query", "\"" + QUERY + "\"");
        field(out, "db", "\"" + o.db + "\"");
        field(out, "nodes", Integer.toString(o.nodes));
        field(out, "concurrency", Integer.toString(o.concurrency));
        field(out, "warmup_s", num(o.warmup));
        field(out, "seconds", num(secs));
        field(out, "reads", Long.toString(n));
        field(out, "reads_per_s", num(n / secs));
        field(out, "p50_us", Long.toString(percentile(0.50)));
        field(out, "p90_us", Long.toString(percentile(0.90)));
        field(out, "p99_us", Long.toString(percentile(0.99)));
        field(out, "max_us", Long.toString(maxMicros.get()));
        field(out, "errors", Long.toString(errors.get()));
        field(out, "wrong_answers", Long.toString(wrong.get()));
        field(out, "client_cpu_us_per_read", num(n == 0 ? 0 : (cpuEnd - cpuStart) / 1e3 / n));
        field(out, "client_cpu_s_total", num((cpuEnd - cpu0) / 1e9));
        field(out, "drained", Boolean.toString(clean));
        if (firstError != null) {
            field(out, "first_error", quote(firstError));
        }
        out.setLength(out.length() - 1);
        out.append('}');
        System.out.println(out);
        System.out.flush();
        return errors.get() + wrong.get() > 0 && n == 0 ? 1 : 0;
    }

    /** Starts one read; when it completes, records it and starts the next (unless stopping). */
    private void next() {
        if (stopping) {
            if (inFlight.decrementAndGet() == 0) {
                drained.countDown();
            }
            return;
        }
        long id = 1 + ThreadLocalRandom.current().nextInt(nodes);
        boolean counts = recording;
        long t0 = System.nanoTime();
        AsyncSession session;
        try {
            session = driver.asyncSession();
        } catch (RuntimeException e) {
            failed(e, counts);
            next();
            return;
        }
        session.runAsync(QUERY, Values.parameters("id", id))
                .thenCompose(ResultCursor::listAsync)
                .whenComplete((records, error) -> session.closeAsync().whenComplete((ignored, closeError) -> {
                    long micros = (System.nanoTime() - t0) / 1000;
                    boolean inWindow = counts && recording;
                    if (error != null) {
                        failed(error, inWindow);
                    } else if (!holds(records, id)) {
                        if (inWindow) {
                            wrong.incrementAndGet();
                        }
                    } else if (inWindow) {
                        reads.incrementAndGet();
                        histogram.incrementAndGet((int) Math.min(micros, BINS - 1));
                        maxMicros.accumulateAndGet(micros, Math::max);
                    }
                    next();
                }));
    }

    private static boolean holds(java.util.List<Record> records, long id) {
        if (records.size() != 1) {
            return false;
        }
        Map<String, Object> props = records.get(0).get("n").asNode().asMap();
        Object got = props.get("id");
        return got instanceof Number && ((Number) got).longValue() == id;
    }

    private void failed(Throwable e, boolean counts) {
        if (counts) {
            errors.incrementAndGet();
        }
        if (firstError == null) {
            firstError = String.valueOf(e);
        }
    }

    private void reset() {
        for (int i = 0; i < BINS; i++) {
            histogram.set(i, 0);
        }
        reads.set(0);
        errors.set(0);
        wrong.set(0);
        maxMicros.set(0);
    }

    private long percentile(double q) {
        long total = 0;
        for (int i = 0; i < BINS; i++) {
            total += histogram.get(i);
        }
        if (total == 0) {
            return 0;
        }
        long rank = (long) Math.ceil(q * total);
        long seen = 0;
        for (int i = 0; i < BINS; i++) {
            seen += histogram.get(i);
            if (seen >= rank) {
                return i;
            }
        }
        return BINS - 1;
    }

    private static long cpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return 0;
    }

    private static void sleepSeconds(double s) throws InterruptedException {
        Thread.sleep((long) (s * 1000));
    }

    private static void field(StringBuilder out, String key, String value) {
        out.append('"').append(key).append("\":").append(value).append(',');
    }

    private static String num(double v) {
        return String.format(Locale.ROOT, "%.2f", v);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** The command line: --db bolt://HOST:PORT --nodes N --concurrency C --seconds S [--warmup S]. */
    static final class Options {
        static final String USAGE = "usage: run OUT --db bolt://HOST:PORT [--nodes 10000] [--concurrency 64]"
                + " [--seconds 10] [--warmup 0] [--stdin]";
        URI db;
        int nodes = 10000;
        int concurrency = 64;
        double seconds = 10;
        double warmup = 0;
        boolean stdin;

        static Options parse(String[] args) {
            Options o = new Options();
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                if (a.equals("--stdin")) {
                    o.stdin = true;
                    continue;
                }
                if (a.equals("-h") || a.equals("--help")) {
                    System.out.println(USAGE);
                    System.exit(0);
                }
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(redacted(a) + " needs a value");
                }
                String v = args[++i];
                try {
                    switch (a) {
                        case "--db" -> o.db = bolt(v);
                        case "--nodes" -> o.nodes = Integer.parseInt(v);
                        case "--concurrency", "-c" -> o.concurrency = Integer.parseInt(v);
                        case "--seconds", "-d" -> o.seconds = Double.parseDouble(v);
                        case "--warmup" -> o.warmup = Double.parseDouble(v);
                        default -> throw new IllegalArgumentException("unknown option " + redacted(a));
                    }
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException(a + ": not a number: " + redacted(v));
                }
            }
            if (o.db == null) {
                throw new IllegalArgumentException("--db bolt://HOST:PORT is required");
            }
            if (o.nodes < 1 || o.concurrency < 1 || o.seconds <= 0 || o.warmup < 0) {
                throw new IllegalArgumentException("--nodes and --concurrency must be >= 1, --seconds > 0, --warmup >= 0");
            }
            return o;
        }

        /**
         * {@code --db}'s URL: bolt:// or neo4j://, with no user or password (those come from the
         * environment, {@link Ceiling#authFromEnvironment}); no message quotes them.
         */
        private static URI bolt(String value) {
            if (value.indexOf('@') >= 0) {
                throw new IllegalArgumentException("--db takes bolt://HOST:PORT with no user or password (give them"
                        + " as NEO4J_USER and NEO4J_PASSWORD in the environment), got '" + redacted(value) + "'");
            }
            URI uri;
            try {
                uri = new URI(value);
            } catch (java.net.URISyntaxException e) {
                uri = null;
            }
            if (uri == null || !("bolt".equals(uri.getScheme()) || "neo4j".equals(uri.getScheme()))
                    || uri.getHost() == null) {
                throw new IllegalArgumentException("--db must be bolt://HOST:PORT, not '" + value + "'");
            }
            return uri;
        }
    }
}
