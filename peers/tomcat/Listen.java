/**
 * The command line both peers share: {@code [--listen HOST:PORT]}, default
 * 127.0.0.1:8080; port 0 picks a free port. A bad command line is one line on
 * stderr and exit status 2, as blocklab's own.
 */
final class Listen {
    final String host;
    final int port;

    private Listen(String host, int port) {
        this.host = host;
        this.port = port;
    }

    static Listen parse(String[] args, String name) {
        String value = "127.0.0.1:8080";
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--listen") && i + 1 < args.length) {
                value = args[++i];
            } else if (args[i].startsWith("--listen=")) {
                value = args[i].substring("--listen=".length());
            } else if (args[i].equals("--help") || args[i].equals("-h")) {
                System.out.println("usage: " + name + " [--listen HOST:PORT]   (port 0 picks a free one)");
                System.exit(0);
            } else {
                fail(name, "unexpected argument '" + args[i] + "' (usage: " + name + " [--listen HOST:PORT])");
            }
        }
        int colon = value.lastIndexOf(':');
        if (colon <= 0) {
            fail(name, "--listen takes HOST:PORT, got '" + value + "'");
        }
        try {
            int port = Integer.parseInt(value.substring(colon + 1));
            if (port < 0 || port > 65535) {
                throw new NumberFormatException();
            }
            return new Listen(value.substring(0, colon), port);
        } catch (NumberFormatException e) {
            fail(name, "--listen: bad port in '" + value + "'");
            return null;
        }
    }

    private static void fail(String name, String message) {
        System.err.println(name + ": " + message);
        System.exit(2);
    }
}
