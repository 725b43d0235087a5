package blocklab.peers.springjdbc;

import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The command line, checked: where to listen, which PostgreSQL to read, its
 * ids (1 to nodes) and the pool's size.
 *
 * <pre>[--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N] [--SPRING.PROPERTY=VALUE ...]</pre>
 *
 * A bad command line is a {@link Usage} error: one line, exit status 2. The
 * database's password is never taken from the command line (which {@code ps}
 * shows to anyone): a --db that carries one is refused, and no message
 * quotes it ({@link #redacted}).
 */
record Options(String host, int port, Database db, long nodes, Integer pool, List<String> springArgs) {
    static final String USAGE = "[--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N] [--SPRING.PROPERTY=VALUE ...]";
    static final int MAX_POOL = 10_000;

    /** A command line the peer cannot run with; its message is the one line printed. */
    static final class Usage extends Exception {
        Usage(String message) {
            super(message);
        }
    }

    /**
     * The PostgreSQL to read: where, which database, as whom. The password is
     * not here: it comes from PGPASSWORD alone, where the caller reads it.
     */
    record Database(String host, int port, String name, String user) {
        /** The JDBC URL, which names this peer as the connections' application_name. */
        String jdbcUrl(String applicationName) {
            return "jdbc:postgresql://" + host + ":" + port + "/" + name
                + "?ApplicationName=" + applicationName;
        }
    }

    static Options parse(String[] args, Map<String, String> env) throws Usage {
        String listen = "127.0.0.1:8080";
        String db = "postgres://127.0.0.1:5432/blocklab";
        String nodes = "10000";
        String pool = null;
        List<String> springArgs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            int eq = arg.indexOf('=');
            String name = eq > 0 ? arg.substring(0, eq) : arg;
            switch (name) {
                case "--listen", "--db", "--nodes", "--pool" -> {
                    String value;
                    if (eq > 0) {
                        value = arg.substring(eq + 1);
                    } else if (i + 1 < args.length) {
                        value = args[++i];
                    } else {
                        throw new Usage(name + " needs a value");
                    }
                    switch (name) {
                        case "--listen" -> listen = value;
                        case "--db" -> db = value;
                        case "--nodes" -> nodes = value;
                        default -> pool = value;
                    }
                }
                case "--server.address", "--server.port" ->
                    throw new Usage("'" + redacted(arg) + "': the address is set with --listen HOST:PORT");
                default -> {
                    if (arg.matches("--[A-Za-z][\\w-]*(\\.[\\w\\[\\]-]+)+=.*")) {
                        springArgs.add(arg); // a Spring property, e.g. --server.tomcat.threads.max=400
                    } else {
                        throw new Usage("unexpected argument '" + redacted(arg) + "'");
                    }
                }
            }
        }

        int colon = listen.lastIndexOf(':');
        if (colon <= 0) {
            throw new Usage("--listen takes HOST:PORT, got '" + listen + "'");
        }
        String host = listen.substring(0, colon);
        int port = parseInt(listen.substring(colon + 1), 0, 65535, "--listen: bad port in '" + listen + "'");
        long nodeCount;
        try {
            nodeCount = Long.parseLong(nodes);
        } catch (NumberFormatException e) {
            nodeCount = 0;
        }
        if (nodeCount < 1) {
            throw new Usage("--nodes takes a positive integer, got '" + nodes + "'");
        }
        Integer poolSize = pool == null ? null
            : parseInt(pool, 1, MAX_POOL, "--pool takes an integer from 1 to " + MAX_POOL + ", got '" + pool + "'");
        return new Options(host, port, database(db, env), nodeCount, poolSize, springArgs);
    }

    /**
     * {@code postgres://[USER@]HOST[:PORT]/DATABASE} (or postgresql://); the
     * user, when the URL names none, is PGUSER's, else "postgres".
     */
    static Database database(String url, Map<String, String> env) throws Usage {
        String shape = "--db takes postgres://[USER@]HOST:PORT/DATABASE, got '" + redacted(url) + "'";
        int scheme = url.indexOf("://");
        int at = url.lastIndexOf('@');
        if (scheme >= 0 && at > scheme && url.substring(scheme + 3, at).contains(":")) {
            throw new Usage("--db must not carry a password (give it as PGPASSWORD in the environment), got '"
                + redacted(url) + "'");
        }
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new Usage(shape);
        }
        String path = uri.getRawPath();
        if (!("postgres".equals(uri.getScheme()) || "postgresql".equals(uri.getScheme()))
                || uri.getHost() == null || path == null || !path.matches("/[^/]+")
                || uri.getRawQuery() != null || uri.getRawFragment() != null) {
            throw new Usage(shape);
        }
        String user = uri.getRawUserInfo() != null
            ? URLDecoder.decode(uri.getRawUserInfo(), StandardCharsets.UTF_8)
            : env.getOrDefault("PGUSER", "postgres");
        if (user.isEmpty()) {
            throw new Usage(shape);
        }
        int port = uri.getPort() < 0 ? 5432 : uri.getPort();
        return new Database(uri.getHost(), port, path.substring(1), user);
    }

    /**
     * {@code text} with everything between a URL's :// and its last @ (a user
     * and a password) replaced by ***; without a scheme, everything before the last @.
     */
    static String redacted(String text) {
        int at = text.lastIndexOf('@');
        if (at < 0) {
            return text;
        }
        int scheme = text.indexOf("://");
        int start = scheme >= 0 && scheme < at ? scheme + 3 : 0;
        return text.substring(0, start) + "***" + text.substring(at);
    }

    private static int parseInt(String raw, int min, int max, String message) throws Usage {
        try {
            int value = Integer.parseInt(raw);
            if (value >= min && value <= max) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new Usage(message);
    }
}
