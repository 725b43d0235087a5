package blocklab.play;

import akka.actor.AbstractActor;
import akka.actor.Props;
import akka.actor.Status;

/**
 * The seed's blocking worker: on each request it makes the synchronous read, holding its
 * dispatcher thread (and its own mailbox) for the whole round trip, and answers the asker.
 * A failed read is answered as a failure, so the asker does not wait out its timeout.
 */
final class GraphEngine extends AbstractActor {

    private final Graph graph;

    private GraphEngine(Graph graph) {
        this.graph = graph;
    }

    static Props props(Graph graph) {
        return Props.create(GraphEngine.class, () -> new GraphEngine(graph));
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(ReadRequest.class, request -> {
                    Object reply;
                    try {
                        reply = graph.readBlocking(request.id());
                    } catch (RuntimeException e) {
                        reply = new Status.Failure(e);
                    }
                    getSender().tell(reply, getSelf());
                })
                .build();
    }
}
