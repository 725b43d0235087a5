package blocklab.play;

import java.io.File;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.TimeUnit;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import play.ApplicationLoader;
import play.BuiltInComponentsFromContext;
import play.Environment;
import play.Mode;
import play.core.server.ServerConfig;
import play.core.server.ServerConfig$;
import play.core.server.ServerProvider$;
import play.mvc.EssentialFilter;
import play.routing.Router;
import scala.Option;

/**
 * The Play 2.7.3 peer: the seed study's Play + Neo4j + Akka application, on Play's Netty
 * server, started from code instead of by the sbt/Maven Play plugin.
 *
 * <p>It does what Play's own {@code play.server.Server.forRouter(Mode.PROD, port, ...)} does
 * (components from a context, the application started, the configured server provider's
 * server created for it), with one difference: the server binds the host given by
 * {@code --listen}, where {@code forRouter} always binds 0.0.0.0.
 */
public final class PlayPeer {

    private PlayPeer() {}

    public static void main(String[] args) {
        // stdout carries one line, "listening on ...": whatever else prints to System.out
        // (Akka's standard-out logger, libraries) goes to stderr.
        PrintStream stdout = System.out;
        System.setOut(System.err);

        Options options;
        try {
            options = Options.parse(args);
        } catch (Options.Help help) {
            stdout.println(Options.USAGE);
            stdout.flush();
            System.exit(0);
            return;
        } catch (IllegalArgumentException e) {
            System.err.println("play: " + e.getMessage() + " (" + Options.USAGE + ")");
            System.exit(2);
            return;
        }

        try {
            start(options, stdout);
        } catch (Throwable t) {
            if (t instanceof play.core.server.ServerListenException) {
                // The port is taken or the address is not ours: the message says which.
                Throwable cause = t.getCause();
                System.err.println("play: cannot start: " + t.getMessage() + (cause == null ? "" : " (" + cause + ")"));
            } else {
                System.err.println("play: cannot start: " + t);
                t.printStackTrace();
            }
            System.exit(1);
        }
    }

    private static void start(Options options, PrintStream stdout) {
        ClassLoader classLoader = PlayPeer.class.getClassLoader();
        Config config = ConfigFactory.load(classLoader);

        Graph graph = Graph.open(options.db());
        Middleware middleware = Middleware.start(config, graph);

        Environment environment = new Environment(new File("."), classLoader, Mode.PROD);
        Components components = new Components(ApplicationLoader.create(environment), graph, middleware, options.nodes());
        play.api.Application application = components.application().asScala();
        play.api.Play.start(application);

        ServerConfig serverConfig = ServerConfig$.MODULE$.apply(
                classLoader,
                new File("."),
                Option.apply((Object) options.port()),
                Option.empty(),
                options.host(),
                Mode.PROD.asScala(),
                System.getProperties());
        play.core.server.Server server =
                ServerProvider$.MODULE$.defaultServerProvider().createServer(serverConfig, application);

        Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(server, middleware, graph), "play-peer-stop"));

        int port = new play.server.Server(server).httpPort();
        stdout.println("listening on http://" + Options.hostForUrl(options.host()) + ":" + port);
        stdout.flush();
    }

    /** On SIGTERM: stop accepting and finish Play, then the AkkaMW system, then the driver. */
    private static void stop(play.core.server.Server server, Middleware middleware, Graph graph) {
        try {
            server.stop();
        } catch (RuntimeException e) {
            System.err.println("play: stopping the server: " + e);
        }
        middleware.stop(3, TimeUnit.SECONDS);
        graph.close(2, TimeUnit.SECONDS);
    }

    /** Play's built-in components with the seven routes and no filters (the seed enabled none). */
    static final class Components extends BuiltInComponentsFromContext {
        private final Graph graph;
        private final Middleware middleware;
        private final long nodes;
        private Router router;

        Components(ApplicationLoader.Context context, Graph graph, Middleware middleware, long nodes) {
            super(context);
            this.graph = graph;
            this.middleware = middleware;
            this.nodes = nodes;
        }

        @Override
        public synchronized Router router() {
            if (router == null) {
                Endpoints endpoints = new Endpoints(graph, middleware, GraphEngineAsync.start(actorSystem(), graph), nodes);
                router = endpoints.routes(this);
            }
            return router;
        }

        @Override
        public List<EssentialFilter> httpFilters() {
            return List.of();
        }
    }
}
