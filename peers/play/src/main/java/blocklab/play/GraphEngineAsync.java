package blocklab.play;

import akka.actor.AbstractActor;
import akka.actor.ActorRef;
import akka.actor.ActorSystem;
import akka.actor.Props;
import akka.pattern.Patterns;

/**
 * The seed's non-blocking actor, one instance in Play's own actor system (the seed bound it
 * with AkkaGuiceSupport): on each request it starts the async read and pipes the result
 * (or the failure) to the asker, so its mailbox never waits on the database.
 */
final class GraphEngineAsync extends AbstractActor {

    static final String NAME = "graph-engineasync";

    private final Graph graph;

    private GraphEngineAsync(Graph graph) {
        this.graph = graph;
    }

    static ActorRef start(ActorSystem system, Graph graph) {
        return system.actorOf(Props.create(GraphEngineAsync.class, () -> new GraphEngineAsync(graph)), NAME);
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(ReadRequest.class, request ->
                        Patterns.pipe(graph.read(request.id()), getContext().getDispatcher()).to(getSender()))
                .build();
    }
}
