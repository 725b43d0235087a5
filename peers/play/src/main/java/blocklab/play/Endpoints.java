package blocklab.play;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;

import akka.actor.ActorRef;
import akka.pattern.Patterns;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import play.BuiltInComponents;
import play.libs.Json;
import play.mvc.Http;
import play.mvc.Result;
import play.mvc.Results;
import play.routing.RequestFunctions;
import play.routing.Router;
import play.routing.RoutingDsl;

/**
 * The seven endpoints of the seed, one execution model each.
 *
 * <p>Every handler is called on Play's default dispatcher, as Play called the seed's
 * controller methods (a {@code JavaAction} runs its method on the application's execution
 * context). RoutingDsl alone would call them on the Netty event loop (its actions run on
 * Play's trampoline), so each route hands its request over to the dispatcher first. The
 * blocking handlers then hold that dispatcher thread for the whole round trip; the
 * asynchronous ones return a CompletionStage and let it go.
 */
final class Endpoints {

    private static final Logger LOG = LoggerFactory.getLogger("blocklab.play");
    /** The seed's ask timeout for the non-blocking actor. */
    private static final Duration ASK_TIMEOUT = Duration.ofMillis(Middleware.ASK_TIMEOUT_MS);

    private final Graph graph;
    private final Middleware middleware;
    private final ActorRef graphEngineAsync;
    private final long nodes;

    Endpoints(Graph graph, Middleware middleware, ActorRef graphEngineAsync, long nodes) {
        this.graph = graph;
        this.middleware = middleware;
        this.graphEngineAsync = graphEngineAsync;
        this.nodes = nodes;
    }

    Router routes(BuiltInComponents components) {
        // Play's default dispatcher (akka.actor.default-dispatcher of Play's actor system).
        Executor dispatcher = components.actorSystem().dispatcher();
        return RoutingDsl.fromComponents(components)
                .GET("/test").routingAsync(blocking(dispatcher, request -> Results.ok("works")))
                .GET("/getData").routingAsync(blocking(dispatcher, this::getData))
                .GET("/getDataAsync").routingAsync(async(dispatcher, this::getDataAsync))
                .GET("/getDataAsync2").routingAsync(async(dispatcher, this::getDataAsync2))
                .GET("/getDataAkka").routingAsync(blocking(dispatcher, this::getDataAkka))
                .GET("/getDataAkkaAsync").routingAsync(async(dispatcher, this::getDataAkkaAsync))
                .GET("/getDataAkkaAsync2").routingAsync(async(dispatcher, this::getDataAkkaAsync2))
                .build();
    }

    /** A handler that returns its Result, called on the dispatcher (the thread is held until it returns). */
    private static RequestFunctions.Params0<CompletionStage<Result>> blocking(
            Executor dispatcher, Function<Http.Request, Result> handler) {
        return request -> CompletableFuture.supplyAsync(() -> handler.apply(request), dispatcher);
    }

    /** A handler that returns a CompletionStage, called on the dispatcher. */
    private static RequestFunctions.Params0<CompletionStage<Result>> async(
            Executor dispatcher, Function<Http.Request, CompletionStage<Result>> handler) {
        return request -> CompletableFuture.supplyAsync(() -> handler.apply(request), dispatcher)
                .thenCompose(Function.identity());
    }

    /** Blocking: the synchronous driver call on this request thread. */
    Result getData(Http.Request request) {
        try {
            return found(graph.readBlocking(requestedId(request)));
        } catch (RuntimeException e) {
            return failed(e);
        }
    }

    /** Non-blocking: the async driver call; the thread is free until the answer comes. */
    CompletionStage<Result> getDataAsync(Http.Request request) {
        return answer(id(request).thenCompose(graph::read));
    }

    /** Two non-blocking reads, the second started when the first completes; answers the second. */
    CompletionStage<Result> getDataAsync2(Http.Request request) {
        return answer(id(request).thenCompose(id -> graph.read(id).thenCompose(first -> graph.read(id))));
    }

    /** Ask the router of four blocking engines, and block this request thread for the answer (5 s). */
    Result getDataAkka(Http.Request request) {
        try {
            return found(middleware.askBlocking(requestedId(request)));
        } catch (Exception e) {
            return failed(e);
        }
    }

    /** Ask the piping actor; the answer completes the stage. */
    CompletionStage<Result> getDataAkkaAsync(Http.Request request) {
        return answer(id(request).thenCompose(this::ask));
    }

    /** Two asks in sequence; answers the second. */
    CompletionStage<Result> getDataAkkaAsync2(Http.Request request) {
        return answer(id(request).thenCompose(id -> ask(id).thenCompose(first -> ask(id))));
    }

    private CompletionStage<Content> ask(long id) {
        return Patterns.ask(graphEngineAsync, new ReadRequest(id), ASK_TIMEOUT).thenApply(Content.class::cast);
    }

    /** The id to read: {@code ?id=N} if given (validated as blocklab does), else random in 1..=nodes. */
    private long requestedId(Http.Request request) {
        String raw = request.getQueryString("id");
        if (raw == null) {
            return ThreadLocalRandom.current().nextLong(1, nodes + 1);
        }
        long id;
        try {
            id = Long.parseLong(raw.trim());
        } catch (NumberFormatException e) {
            String shown = raw.codePoints().limit(40)
                    .collect(StringBuilder::new, StringBuilder::appendCodePoint, StringBuilder::append).toString();
            throw new BadRequest("id must be an integer from 1 to " + nodes + ", got '" + shown + "'");
        }
        if (id < 1 || id > nodes) {
            throw new BadRequest("id " + id + " is out of range: ids run from 1 to " + nodes);
        }
        return id;
    }

    private CompletionStage<Long> id(Http.Request request) {
        try {
            return CompletableFuture.completedFuture(requestedId(request));
        } catch (BadRequest e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private CompletionStage<Result> answer(CompletionStage<Content> content) {
        return content.handle((found, error) -> error == null ? found(found) : failed(error));
    }

    private static Result found(Content content) {
        return Results.ok(content.toJson());
    }

    private Result failed(Throwable error) {
        Throwable e = GraphError.unwrap(error);
        if (e instanceof BadRequest) {
            return problem(400, e.getMessage());
        }
        GraphError graphError = GraphError.of(graph.target(), e);
        if (graphError.status >= 500) {
            LOG.warn("request failed ({}): {}", graphError.status, graphError.getMessage());
        }
        return problem(graphError.status, graphError.publicMessage);
    }

    private static Result problem(int status, String message) {
        return Results.status(status, Json.newObject().put("error", message));
    }

    /** A request with a bad {@code id}: 400. */
    static final class BadRequest extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BadRequest(String message) {
            super(message, null, false, false);
        }
    }
}
