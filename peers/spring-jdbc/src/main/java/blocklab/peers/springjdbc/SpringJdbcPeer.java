package blocklab.peers.springjdbc;

import java.util.HashMap;
import java.util.Map;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;

/**
 * Study 1 on PostgreSQL, the blocking way: Spring Boot with
 * spring-boot-starter-web (embedded Tomcat, its pool of 200 request threads)
 * and JdbcTemplate over Spring Boot's default pool, HikariCP (10 connections).
 * {@link ContentEndpoints} serves {@code /test} and {@code /getData}.
 *
 * <pre>java -jar spring-jdbc.jar [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N] [--SPRING.PROPERTY=VALUE ...]</pre>
 *
 * Prints {@code listening on http://HOST:PORT} once Tomcat accepts (port 0
 * picks a free one; the line gives the real port), and stops on SIGTERM. The
 * pool connects on the first read, so the server starts, and answers 503,
 * without a database. With {@code -Dspring.threads.virtual.enabled=true}
 * (Java 21+) Tomcat runs each request on a virtual thread, so JdbcTemplate
 * blocks a virtual thread rather than one of 200: the spring-jdbc-vt peer,
 * which also sets {@code -Dblocklab.peer=spring-jdbc-vt} (its name in
 * messages and in pg_stat_activity's application_name).
 */
@SpringBootApplication
public class SpringJdbcPeer {
    /** The peer's name: in messages, and the connections' application_name. */
    static final String NAME = System.getProperty("blocklab.peer", "spring-jdbc");

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
        // lowest precedence (a --spring.datasource... argument still wins).
        // The password is PGPASSWORD's, never the command line's.
        Map<String, Object> properties = new HashMap<>();
        String host = options.host();
        properties.put("server.address", host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host);
        properties.put("server.port", options.port());
        properties.put("spring.datasource.url", options.db().jdbcUrl(NAME));
        properties.put("spring.datasource.username", options.db().user());
        String password = System.getenv("PGPASSWORD");
        if (password != null) {
            properties.put("spring.datasource.password", password);
        }
        properties.put("blocklab.nodes", options.nodes());
        if (options.pool() != null) {
            // HikariCP's minimumIdle defaults to maximumPoolSize (a fixed pool); kept so.
            properties.put("spring.datasource.hikari.maximum-pool-size", options.pool());
            properties.put("spring.datasource.hikari.minimum-idle", options.pool());
        }

        SpringApplication app = new SpringApplication(SpringJdbcPeer.class);
        app.setDefaultProperties(properties);
        app.addListeners(new Listening(host));
        app.run(options.springArgs().toArray(new String[0]));
    }
}
