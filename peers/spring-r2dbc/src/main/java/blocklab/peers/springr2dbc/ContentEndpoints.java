package blocklab.peers.springr2dbc;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.dao.PermissionDeniedDataAccessException;
import org.springframework.dao.TransientDataAccessResourceException;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;

import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.R2dbcNonTransientResourceException;
import io.r2dbc.spi.R2dbcPermissionDeniedException;
import io.r2dbc.spi.R2dbcTransientResourceException;
import reactor.core.publisher.Mono;

/**
 * The endpoints: {@code /test} answers "works"; {@code /getDataAsync} reads
 * the row {@code ?id=} names (or a random id from 1 to --nodes) with R2DBC and
 * answers it as JSON; {@code /getDataAsync2} reads it twice in sequence, the
 * second read started when the first completes, and answers the second. No
 * thread waits: each handler returns a {@code Mono} at once, and the event
 * loop goes on serving others until PostgreSQL's answer arrives.
 *
 * <p>Statuses: 400 for an id that is not an integer from 1 to --nodes, 404 for
 * a row that is not there, 503 when the database cannot be reached or refuses
 * the connection, 500 otherwise; each error is {@code {"error":"..."}}.
 */
@RestController
public class ContentEndpoints {
    /** The read, a parameterised statement (the driver prepares it, $1 bound). */
    static final String QUERY = "SELECT id, name, code, mime_type, content_type, body FROM content WHERE id = $1";

    private static final Logger LOG = LoggerFactory.getLogger(ContentEndpoints.class);
    /** Failures are logged one line at a time, at most one every 10 s. */
    private static final long LOG_EVERY_NANOS = 10_000_000_000L;

    /** A row of content, written by Jackson in this order. */
    @JsonPropertyOrder({"id", "name", "code", "mimeType", "contentType", "body"})
    public record Content(long id, String name, String code, String mimeType, String contentType, String body) {
    }

    /** What an error answers, with its status. */
    public record Failure(String error) {
    }

    /** A request answered with an error status: its public message. */
    static final class Problem extends RuntimeException {
        final HttpStatus status;

        Problem(HttpStatus status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    private final DatabaseClient db;
    private final long nodes;
    private final AtomicLong lastLogged = new AtomicLong(System.nanoTime() - LOG_EVERY_NANOS);

    public ContentEndpoints(DatabaseClient db, @Value("${blocklab.nodes:10000}") long nodes) {
        this.db = db;
        this.nodes = nodes;
    }

    @GetMapping("/test")
    public String test() {
        return "works";
    }

    @GetMapping("/getDataAsync")
    public Mono<ResponseEntity<Object>> getDataAsync(@RequestParam(name = "id", required = false) String raw) {
        return answer(Mono.defer(() -> read(requestedId(raw))));
    }

    @GetMapping("/getDataAsync2")
    public Mono<ResponseEntity<Object>> getDataAsync2(@RequestParam(name = "id", required = false) String raw) {
        // flatMap: the second read is subscribed to, and so sent, only once the first has answered.
        return answer(Mono.defer(() -> {
            long id = requestedId(raw);
            return read(id).flatMap(first -> read(id));
        }));
    }

    /**
     * The non-blocking read: a cold Mono that, when subscribed, takes a pooled
     * connection, sends the statement and emits the row (empty: a 404
     * Problem) on the event loop that receives PostgreSQL's answer.
     */
    Mono<Content> read(long id) {
        return db.sql(QUERY)
            .bind(0, id)
            .map(row -> new Content(row.get("id", Long.class), row.get("name", String.class),
                row.get("code", String.class), row.get("mime_type", String.class),
                row.get("content_type", String.class), row.get("body", String.class)))
            .one()
            .switchIfEmpty(Mono.error(() -> new Problem(HttpStatus.NOT_FOUND, "no content with id " + id)));
    }

    /** ?id=N if given (an integer from 1 to nodes), else a random id in 1..=nodes; a 400 Problem otherwise. */
    long requestedId(String raw) {
        if (raw == null) {
            return ThreadLocalRandom.current().nextLong(1, nodes + 1);
        }
        String text = raw.trim();
        long id = -1;
        if (text.matches("[+-]?[0-9]{1,19}")) {
            try {
                id = Long.parseLong(text);
            } catch (NumberFormatException e) {
                id = -1;
            }
        }
        if (id < 1 || id > nodes) {
            throw new Problem(HttpStatus.BAD_REQUEST, "id must be an integer from 1 to " + nodes
                + ", got '" + (raw.length() > 40 ? raw.substring(0, 40) + "..." : raw) + "'");
        }
        return id;
    }

    private Mono<ResponseEntity<Object>> answer(Mono<Content> content) {
        return content.map(c -> respond(HttpStatus.OK, c)).onErrorResume(this::failed);
    }

    private Mono<ResponseEntity<Object>> failed(Throwable e) {
        if (e instanceof Problem p) {
            return Mono.just(respond(p.status, new Failure(p.getMessage())));
        }
        boolean unavailable = unavailable(e);
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        long now = System.nanoTime();
        long last = lastLogged.get();
        if (now - last >= LOG_EVERY_NANOS && lastLogged.compareAndSet(last, now)) {
            LOG.warn("{}: {} ({}: {}; such failures are logged at most once every 10 s)",
                SpringR2dbcPeer.NAME, unavailable ? "database unavailable, answering 503" : "read failed, answering 500",
                root.getClass().getName(), root.getMessage());
        }
        if (unavailable) {
            return Mono.just(respond(HttpStatus.SERVICE_UNAVAILABLE,
                new Failure("database unavailable: " + brief(root.getMessage()))));
        }
        return Mono.just(respond(HttpStatus.INTERNAL_SERVER_ERROR, new Failure("database read failed")));
    }

    /**
     * Whether {@code e} says the database cannot be reached or refuses us: no
     * connection could be had or it broke (a resource failure, a refused or
     * closed socket), or PostgreSQL's SQLSTATE is a connection exception (08),
     * an authorization failure (28), an operator intervention (57P: shutting
     * down, cannot connect now) or too many connections (53300).
     */
    static boolean unavailable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof DataAccessResourceFailureException || t instanceof TransientDataAccessResourceException
                    || t instanceof PermissionDeniedDataAccessException
                    || t instanceof R2dbcNonTransientResourceException || t instanceof R2dbcTransientResourceException
                    || t instanceof R2dbcPermissionDeniedException
                    || t instanceof java.net.ConnectException || t instanceof java.nio.channels.ClosedChannelException) {
                return true;
            }
            if (t instanceof R2dbcException r2dbc && r2dbc.getSqlState() != null) {
                String state = r2dbc.getSqlState();
                if (state.startsWith("08") || state.startsWith("28") || state.startsWith("57P") || state.equals("53300")) {
                    return true;
                }
            }
        }
        return false;
    }

    private static String brief(String message) {
        String text = message == null ? "" : message;
        return text.length() > 200 ? text.substring(0, 200) + "..." : text;
    }

    private static ResponseEntity<Object> respond(HttpStatus status, Object body) {
        return ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON).body(body);
    }
}
