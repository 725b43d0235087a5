package blocklab.neo4j;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

/**
 * The project's managed Neo4j: Neo4j Community embedded in this process, with
 * Bolt on {@code --listen HOST:PORT}, authentication off unless
 * {@code NEO4J_AUTH} asks for it, and its store in {@code --store DIR}. It
 * prints {@code bolt://HOST:PORT} on stdout once Bolt accepts connections and
 * shuts the database down cleanly on SIGTERM.
 *
 * <p>{@code NEO4J_AUTH=USER/PASSWORD} in the environment (the convention of
 * Neo4j's Docker image; unset or {@code none}: off) turns authentication on,
 * with USER's password set to PASSWORD before the address is printed: a
 * client that waits for that line never meets the first-start password.
 * The password comes only through the environment, so that it is never on a
 * command line ({@code ps}), and the launcher never prints it.
 *
 * <pre>java -cp ... blocklab.neo4j.Launcher [--listen HOST:PORT] [--store DIR] [--page-cache SIZE]</pre>
 *
 * The heap is the JVM's ({@code -Xmx}); the page cache, which holds the store
 * off the heap, is {@code --page-cache} (default 256m: 10,000 content nodes
 * take a few MiB, so the whole store stays cached with room to spare).
 */
public final class Launcher {
    private static final String NAME = "neo4j-launcher";
    private static final String USAGE =
            "usage: " + NAME + " [--listen HOST:PORT] [--store DIR] [--page-cache SIZE]   (port 0 picks a free one)";

    public static void main(String[] args) throws Exception {
        String listen = "127.0.0.1:7687";
        Path store = Path.of(".local/neo4j/store");
        long pageCache = ByteUnit.mebiBytes(256);
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                System.out.println(USAGE);
                return;
            }
            if (i + 1 >= args.length) {
                fail("'" + arg + "' " + (arg.startsWith("--") ? "needs a value" : "is not an option") + " (" + USAGE + ")");
            }
            String value = args[++i];
            switch (arg) {
                case "--listen" -> listen = value;
                case "--store" -> store = Path.of(value);
                case "--page-cache" -> pageCache = parseSize(value);
                default -> fail("unexpected argument '" + arg + "' (" + USAGE + ")");
            }
        }
        int colon = listen.lastIndexOf(':');
        if (colon <= 0) {
            fail("--listen takes HOST:PORT, got '" + listen + "'");
        }
        String host = listen.substring(0, colon);
        int port = parsePort(listen.substring(colon + 1));
        if (port == 0) {
            port = freePort(host);
        }

        Credentials credentials = Credentials.fromEnvironment();
        Files.createDirectories(store);
        DatabaseManagementService service = new DatabaseManagementServiceBuilder(store)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                .setConfig(HttpConnector.enabled, false)
                .setConfig(HttpsConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, credentials != null)
                .setConfig(GraphDatabaseSettings.pagecache_memory, pageCache)
                // Keep the transaction logs small: the store is a test fixture, not a record.
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "false")
                .build();
        // SIGTERM runs the shutdown hooks: the database closes its store cleanly.
        Runtime.getRuntime().addShutdownHook(new Thread(service::shutdown, "neo4j-shutdown"));
        // Ready means answering queries, not only accepting connections: after a
        // crash the default database recovers its store before it serves.
        GraphDatabaseService db = service.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        if (!db.isAvailable(Duration.ofSeconds(120).toMillis())) {
            System.err.println(NAME + ": the database did not become available within 120 s");
            System.exit(1);
        }
        db.executeTransactionally("RETURN 1");
        if (credentials != null) {
            credentials.apply(service);
            System.err.println(NAME + ": authentication on, as user " + credentials.user());
        }
        waitForBolt(host, port, Duration.ofSeconds(60));
        System.out.println("bolt://" + host + ":" + port);
        System.out.flush();
        Thread.currentThread().join();
    }

    /** A user and its password, from {@code NEO4J_AUTH=USER/PASSWORD}. */
    private record Credentials(String user, String password) {
        /** The credentials {@code NEO4J_AUTH} asks for; null for none (unset, empty or {@code none}). */
        static Credentials fromEnvironment() {
            String auth = System.getenv("NEO4J_AUTH");
            if (auth == null || auth.isEmpty() || auth.equals("none")) {
                return null;
            }
            // The user ends at the first '/': a password may hold one, a user name may not.
            int slash = auth.indexOf('/');
            if (slash <= 0 || slash == auth.length() - 1) {
                fail("NEO4J_AUTH takes USER/PASSWORD or none (its value is not printed)");
            }
            return new Credentials(auth.substring(0, slash), auth.substring(slash + 1));
        }

        /**
         * USER with PASSWORD, no change required, through the system database (the embedded
         * API runs with authentication bypassed, as neo4j-admin's set-initial-password does on
         * a stopped one). Neo4j's own first user is altered; any other is created, or replaced
         * when a store of an earlier start holds it. Both are Community's user management.
         */
        void apply(DatabaseManagementService service) {
            GraphDatabaseService system = service.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
            String command = user.equals("neo4j")
                    ? "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED"
                    : "CREATE OR REPLACE USER $user SET PASSWORD $password CHANGE NOT REQUIRED";
            try {
                system.executeTransactionally(command, Map.of("user", user, "password", password));
            } catch (RuntimeException e) {
                // Neo4j's messages name a rule (e.g. the minimum length), never the password.
                System.err.println(NAME + ": NEO4J_AUTH: cannot set " + user + "'s password: " + e.getMessage());
                System.exit(2);
            }
        }
    }

    private static void waitForBolt(String host, int port, Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (System.nanoTime() < deadline) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(host, port), 500);
                return;
            } catch (IOException notYet) {
                Thread.sleep(50);
            }
        }
        System.err.println(NAME + ": Bolt did not accept connections on " + host + ":" + port + " within " + limit.toSeconds() + " s");
        System.exit(1);
    }

    /** A port free now on {@code host}: bound, read and closed. */
    private static int freePort(String host) throws IOException {
        try (ServerSocket socket = new ServerSocket()) {
            socket.bind(new InetSocketAddress(host, 0));
            return socket.getLocalPort();
        }
    }

    private static int parsePort(String text) {
        try {
            int port = Integer.parseInt(text);
            if (port >= 0 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        fail("--listen: bad port '" + text + "'");
        return -1;
    }

    /** 256m, 1g, 512k or a number of bytes. */
    private static long parseSize(String text) {
        String t = text.trim().toLowerCase();
        long unit = 1;
        if (t.endsWith("k")) {
            unit = ByteUnit.kibiBytes(1);
        } else if (t.endsWith("m")) {
            unit = ByteUnit.mebiBytes(1);
        } else if (t.endsWith("g")) {
            unit = ByteUnit.gibiBytes(1);
        }
        String digits = unit == 1 ? t : t.substring(0, t.length() - 1);
        try {
            long value = Long.parseLong(digits);
            if (value > 0) {
                return value * unit;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        fail("--page-cache: bad size '" + text + "' (e.g. 256m, 1g)");
        return -1;
    }

    private static void fail(String message) {
        System.err.println(NAME + ": " + message);
        System.exit(2);
    }
}
