package blocklab.peers.springr2dbc;

import java.util.HashMap;
import java.util.Map;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;

/**
 * Study 1 on PostgreSQL, the reactive way: Spring Boot with
 * spring-boot-starter-webflux (Reactor Netty's event loops) and Spring Data
 * R2DBC's DatabaseClient over Spring Boot's default pool, r2dbc-pool (10
 * connections), on the R2DBC PostgreSQL driver. {@link ContentEndpoints}
 * serves {@code /test}, {@code /getDataAsync} and {@code /getDataAsync2}.
 *
 * <pre>java -jar spring-r2dbc.jar [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N] [--SPRING.PROPERTY=VALUE ...]</pre>
 *
 * Prints {@code listening on http://HOST:PORT} once Netty accepts (port 0
 * picks a free one; the line gives the real port), and stops on SIGTERM. The
 * pool connects on the first read, so the server starts, and answers 503,
 * without a database.
 */
@SpringBootApplication
public class SpringR2dbcPeer {
    /** The peer's name: in messages, and the connections' application_name. */
    static final String NAME = System.getProperty("blocklab.peer", "spring-r2dbc");
    /** Spring Boot's spring.r2dbc.pool.initial-size, which --pool keeps at most its max-size. */
    static final int BOOT_INITIAL_SIZE = 10;

    /** Prints the 'listening on' line once the web server accepts, with its real port. */
    static final class Listening implements ApplicationListener<WebServerInitializedEvent> {
        private final String host;

        Listening(String host) {
            this.host = host;
        }

        @Override
        public void onApplicationEvent(WebServerInitializedEvent event) {
            System.out.println("listening on http://" + host + ":" + event.getWebServer().getPort());
            System.out.flush();
        }
    }

    public static void main(String[] args) {
        for (String arg : args) {
            if (arg.equals("--help") || arg.equals("-h")) {
                System.out.println("usage: " + NAME + " " + Options.USAGE + "   (port 0 picks a free one)");
                return;
            }
        }
        Options options;
        try {
            options = Options.parse(args, System.getenv());
        } catch (Options.Usage e) {
            System.err.println(NAME + ": " + e.getMessage());
            System.exit(2);
            return;
        }

        // The database and the pool as Spring Boot's own properties, at the
        // lowest precedence (a --spring.r2dbc... argument still wins).
        // The password is PGPASSWORD's, never the command line's.
        Map<String, Object> properties = new HashMap<>();
        String host = options.host();
        properties.put("server.address", host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host);
        properties.put("server.port", options.port());
        properties.put("spring.r2dbc.url", options.db().r2dbcUrl());
        properties.put("spring.r2dbc.username", options.db().user());
        String password = System.getenv("PGPASSWORD");
        if (password != null) {
            properties.put("spring.r2dbc.password", password);
        }
        // r2dbc-postgresql's option for the connections' application_name.
        properties.put("spring.r2dbc.properties.applicationName", NAME);
        properties.put("blocklab.nodes", options.nodes());
        if (options.pool() != null) {
            properties.put("spring.r2dbc.pool.max-size", options.pool());
            properties.put("spring.r2dbc.pool.initial-size", Math.min(options.pool(), BOOT_INITIAL_SIZE));
        }

        SpringApplication app = new SpringApplication(SpringR2dbcPeer.class);
        app.setDefaultProperties(properties);
        app.addListeners(new Listening(host));
        app.run(options.springArgs().toArray(new String[0]));
    }
}
