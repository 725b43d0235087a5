import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.logging.Level;
import java.util.logging.Logger;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.apache.catalina.Context;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.startup.Tomcat;

/**
 * The engine under Spring Web: an embedded Tomcat 10.1 with the NIO connector
 * and Spring Boot's connector defaults (maxThreads 200, acceptCount 100,
 * maxConnections 8192). {@code /delay} sleeps its request thread
 * ({@code Thread.sleep} in a servlet, as the seed's Spring Web controller),
 * then answers {@code {"success":true}}; {@code /test} answers "works".
 *
 * <pre>java -cp ... TomcatPeer [--listen HOST:PORT]</pre>
 *
 * Prints {@code listening on http://HOST:PORT} once it accepts (port 0 picks
 * a free one), and stops on SIGTERM.
 */
public final class TomcatPeer {
    static final long DEFAULT_MS = 5000;
    static final long MAX_MS = 600_000;

    public static void main(String[] args) throws Exception {
        Listen listen = Listen.parse(args, "TomcatPeer");
        // Tomcat logs through java.util.logging; only warnings, on stderr.
        Logger.getLogger("org.apache").setLevel(Level.WARNING);

        Tomcat tomcat = new Tomcat();
        File base = Files.createTempDirectory("blocklab-tomcat").toFile();
        base.deleteOnExit();
        tomcat.setBaseDir(base.getAbsolutePath());

        Connector connector = new Connector("org.apache.coyote.http11.Http11NioProtocol");
        connector.setPort(listen.port);
        connector.setProperty("address", listen.host);
        connector.setProperty("maxThreads", "200");
        connector.setProperty("acceptCount", "100");
        connector.setProperty("maxConnections", "8192");
        tomcat.getService().addConnector(connector);
        tomcat.setConnector(connector);

        Context context = tomcat.addContext("", null);
        Tomcat.addServlet(context, "delay", new DelayServlet()).addMapping("/delay");
        Tomcat.addServlet(context, "test", new TestServlet()).addMapping("/test");

        tomcat.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                tomcat.stop();
                tomcat.destroy();
            } catch (Exception e) {
                System.err.println("TomcatPeer: stopping: " + e);
            }
        }));
        System.out.println("listening on http://" + listen.host + ":" + connector.getLocalPort());
        System.out.flush();
        tomcat.getServer().await();
    }

    /** {@code /delay?ms=N}: sleeps this request's thread, then answers. */
    static final class DelayServlet extends HttpServlet {
        @Override
        protected void doGet(HttpServletRequest request, HttpServletResponse response) throws IOException {
            String raw = request.getParameter("ms");
            long ms = DEFAULT_MS;
            if (raw != null) {
                try {
                    ms = Long.parseLong(raw.trim());
                } catch (NumberFormatException e) {
                    ms = -1;
                }
                if (ms < 0 || ms > MAX_MS) {
                    response.setStatus(400);
                    json(response, "{\"error\":\"ms must be an integer from 0 to " + MAX_MS + "\"}");
                    return;
                }
            }
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                response.setStatus(503);
                json(response, "{\"error\":\"interrupted\"}");
                return;
            }
            json(response, "{\"success\":true}");
        }
    }

    /** {@code /test}: no I/O. */
    static final class TestServlet extends HttpServlet {
        @Override
        protected void doGet(HttpServletRequest request, HttpServletResponse response) throws IOException {
            response.setContentType("text/plain;charset=UTF-8");
            response.getWriter().write("works");
        }
    }

    static void json(HttpServletResponse response, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        response.setContentType("application/json");
        response.setContentLength(bytes.length);
        response.getOutputStream().write(bytes);
    }
}
