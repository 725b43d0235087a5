package blocklab.play;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * The command line: {@code [--listen HOST:PORT] [--db bolt://HOST:PORT] [--nodes N]}. The
 * database's user and password are not on it: they come from the environment
 * ({@link Graph#authFromEnvironment}), so that {@code ps} never shows them; a {@code --db}
 * that carries them is refused, and no message quotes them.
 */
record Options(String host, int port, URI db, long nodes) {

    static final String USAGE = "usage: run OUT [--listen HOST:PORT] [--db bolt://HOST:PORT] [--nodes N]";

    /** Asked for with -h or --help. */
    static final class Help extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Help() {
            super(null, null, false, false);
        }
    }

    static Options parse(String[] args) {
        String listen = "127.0.0.1:9000";
        String db = "bolt://127.0.0.1:7687";
        String nodes = "10000";
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("-h") || arg.equals("--help")) {
                throw new Help();
            }
            String name = arg;
            String value = null;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                name = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            }
            if (!name.equals("--listen") && !name.equals("--db") && !name.equals("--nodes")) {
                throw new IllegalArgumentException("unknown argument '" + redacted(arg) + "'");
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(name + " needs a value");
                }
                value = args[++i];
            }
            switch (name) {
                case "--listen" -> listen = value;
                case "--db" -> db = value;
                default -> nodes = value;
            }
        }
        HostPort hostPort = listen(listen);
        return new Options(hostPort.host, hostPort.port, bolt(db), nodes(nodes));
    }

    private record HostPort(String host, int port) {}

    private static HostPort listen(String value) {
        int colon = value.lastIndexOf(':');
        if (colon <= 0 || colon == value.length() - 1) {
            throw new IllegalArgumentException("--listen wants HOST:PORT, got '" + value + "'");
        }
        String host = value.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(value.substring(colon + 1));
        } catch (NumberFormatException e) {
            port = -1;
        }
        if (host.isEmpty() || port < 0 || port > 65535) {
            throw new IllegalArgumentException("--listen wants HOST:PORT with a port from 0 to 65535, got '" + value + "'");
        }
        return new HostPort(host, port);
    }

    private static URI bolt(String value) {
        if (value.indexOf('@') >= 0) {
            throw new IllegalArgumentException("--db takes bolt://HOST:PORT with no user or password (give them as"
                    + " NEO4J_USER and NEO4J_PASSWORD in the environment), got '" + redacted(value) + "'");
        }
        URI uri;
        try {
            uri = new URI(value);
        } catch (URISyntaxException e) {
            uri = null;
        }
        if (uri == null || !"bolt".equals(uri.getScheme()) || uri.getHost() == null || uri.getPort() < 0
                || uri.getUserInfo() != null || !(uri.getRawPath() == null || uri.getRawPath().isEmpty())) {
            throw new IllegalArgumentException("--db wants bolt://HOST:PORT, got '" + redacted(value) + "'");
        }
        return uri;
    }

    private static long nodes(String value) {
        long n;
        try {
            n = Long.parseLong(value);
        } catch (NumberFormatException e) {
            n = 0;
        }
        if (n < 1) {
            throw new IllegalArgumentException("--nodes wants a positive integer, got '" + value + "'");
        }
        return n;
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

    /** The host as it goes into a URL: IPv6 addresses in brackets. */
    static String hostForUrl(String host) {
        return host.contains(":") ? "[" + host + "]" : host;
    }
}
