package blocklab.play;

import java.util.concurrent.TimeUnit;

import akka.actor.ActorRef;
import akka.actor.ActorSystem;
import akka.pattern.Patterns;
import akka.routing.FromConfig;
import com.typesafe.config.Config;
import scala.concurrent.Await;
import scala.concurrent.Future;
import scala.concurrent.duration.FiniteDuration;

/**
 * The seed's "Middleware": a separate actor system named {@code AkkaMW} (configured by the
 * {@code AkkaMW} block of application.conf), holding the {@link RequestRouter} as a pool of
 * one from its deployment config, on its own dispatcher ({@code mw-dispatcher}).
 */
final class Middleware {

    static final String SYSTEM = "AkkaMW";
    /** The seed's ask timeout. */
    static final long ASK_TIMEOUT_MS = 30_000;
    /** The seed's Await.result limit in the controller. */
    static final FiniteDuration AWAIT = FiniteDuration.create(5, TimeUnit.SECONDS);

    private final ActorSystem system;
    private final ActorRef router;

    private Middleware(ActorSystem system, ActorRef router) {
        this.system = system;
        this.router = router;
    }

    static Middleware start(Config config, Graph graph) {
        ActorSystem system = ActorSystem.create(SYSTEM, config.getConfig(SYSTEM));
        ActorRef router = system.actorOf(
                FromConfig.getInstance().props(RequestRouter.props(graph).withDispatcher("mw-dispatcher")),
                "RequestRouter");
        return new Middleware(system, router);
    }

    /**
     * Asks the router and blocks the calling thread (a Play request thread) until the answer,
     * at most 5 s, as the seed's controller did with Await.result.
     */
    Content askBlocking(long id) throws Exception {
        Future<Object> answer = Patterns.ask(router, new ReadRequest(id), ASK_TIMEOUT_MS);
        return (Content) Await.result(answer, AWAIT);
    }

    void stop(long timeout, TimeUnit unit) {
        try {
            Await.result(system.terminate(), FiniteDuration.create(timeout, unit));
        } catch (Exception e) {
            System.err.println("play: stopping " + SYSTEM + ": " + e);
        }
    }
}
