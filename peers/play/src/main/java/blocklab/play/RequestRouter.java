package blocklab.play;

import java.util.ArrayList;
import java.util.List;

import akka.actor.AbstractActor;
import akka.actor.ActorRef;
import akka.actor.Props;
import akka.actor.Terminated;
import akka.routing.ActorRefRoutee;
import akka.routing.RoundRobinRoutingLogic;
import akka.routing.Routee;
import akka.routing.Router;

/**
 * The seed's router: it starts {@value #ENGINES} {@link GraphEngine} children and hands each
 * request to the next one, round-robin, with the asker as the sender, so the engine answers
 * the asker directly.
 */
final class RequestRouter extends AbstractActor {

    static final int ENGINES = 4;

    private final Graph graph;
    private Router router;

    private RequestRouter(Graph graph) {
        this.graph = graph;
        List<Routee> routees = new ArrayList<>();
        for (int i = 0; i < ENGINES; i++) {
            routees.add(new ActorRefRoutee(engine()));
        }
        router = new Router(new RoundRobinRoutingLogic(), routees);
    }

    static Props props(Graph graph) {
        return Props.create(RequestRouter.class, () -> new RequestRouter(graph));
    }

    private ActorRef engine() {
        ActorRef engine = getContext().actorOf(GraphEngine.props(graph));
        getContext().watch(engine);
        return engine;
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(ReadRequest.class, request -> router.route(request, getSender()))
                .match(Terminated.class, stopped -> {
                    // An engine that stopped is replaced, so the pool stays at four.
                    router = router.removeRoutee(stopped.actor()).addRoutee(new ActorRefRoutee(engine()));
                })
                .build();
    }
}
