package blocklab.peers.springjdbc;

import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.List;
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
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowMapper;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;

/**
 * The endpoints: {@code /test} answers "works"; {@code /getData} reads the
 * row {@code ?id=} names (or a random id from 1 to --nodes) with JdbcTemplate,
 * on the thread that serves the request, and answers it as JSON.
 *
 * <p>Statuses: 400 for an id that is not an integer from 1 to --nodes, 404 for
 * a row that is not there, 503 when the database cannot be reached or refuses
 * the connection, 500 otherwise; each error is {@code {"error":"..."}}.
 */
@RestController
public class ContentEndpoints {
    /** The read, a prepared statement (pgjdbc sends it as $1). */
    static final String QUERY = "SELECT id, name, code, mime_type, content_type, body FROM content WHERE id = ?";

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

    private static final RowMapper<Content> ROW = (rs, n) -> new Content(rs.getLong("id"), rs.getString("name"),
        rs.getString("code"), rs.getString("mime_type"), rs.getString("content_type"), rs.getString("body"));

    private final JdbcTemplate jdbc;
    private final long nodes;
    private final AtomicLong lastLogged = new AtomicLong(System.nanoTime() - LOG_EVERY_NANOS);

    public ContentEndpoints(JdbcTemplate jdbc, @Value("${blocklab.nodes:10000}") long nodes) {
        this.jdbc = jdbc;
        this.nodes = nodes;
    }

    @GetMapping("/test")
    public String test() {
        return "works";
    }

    @GetMapping("/getData")
    public ResponseEntity<Object> getData(@RequestParam(name = "id", required = false) String raw) {
        long id;
        if (raw == null) {
            id = ThreadLocalRandom.current().nextLong(1, nodes + 1);
        } else {
            id = parseId(raw);
            if (id < 1) {
                return answer(HttpStatus.BAD_REQUEST, new Failure("id must be an integer from 1 to " + nodes
                    + ", got '" + (raw.length() > 40 ? raw.substring(0, 40) + "..." : raw) + "'"));
            }
        }
        // The blocking call, where the request is served: this request thread
        // (Tomcat's, or a virtual thread in spring-jdbc-vt) waits for a pooled
        // connection (HikariCP, up to its connectionTimeout of 30 s) and then
        // for the whole round trip to PostgreSQL.
        List<Content> rows;
        try {
            rows = jdbc.query(QUERY, ROW, id);
        } catch (RuntimeException e) {
            return failed(e);
        }
        if (rows.isEmpty()) {
            return answer(HttpStatus.NOT_FOUND, new Failure("no content with id " + id));
        }
        return answer(HttpStatus.OK, rows.get(0));
    }

    /** {@code raw} as an id from 1 to nodes, or -1. */
    long parseId(String raw) {
        String text = raw.trim();
        if (!text.matches("[+-]?[0-9]{1,19}")) {
            return -1;
        }
        try {
            long id = Long.parseLong(text);
            return id >= 1 && id <= nodes ? id : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private ResponseEntity<Object> failed(RuntimeException e) {
        boolean unavailable = unavailable(e);
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        long now = System.nanoTime();
        long last = lastLogged.get();
        if (now - last >= LOG_EVERY_NANOS && lastLogged.compareAndSet(last, now)) {
            LOG.warn("{}: {} ({}: {}; such failures are logged at most once every 10 s)",
                SpringJdbcPeer.NAME, unavailable ? "database unavailable, answering 503" : "read failed, answering 500",
                root.getClass().getName(), root.getMessage());
        }
        if (unavailable) {
            return answer(HttpStatus.SERVICE_UNAVAILABLE, new Failure("database unavailable: " + brief(root.getMessage())));
        }
        return answer(HttpStatus.INTERNAL_SERVER_ERROR, new Failure("database read failed"));
    }

    /**
     * Whether {@code e} says the database cannot be reached or refuses us: no
     * connection could be had (HikariCP timed out or could not start its pool),
     * or PostgreSQL's SQLSTATE is a connection exception (08), an
     * authorization failure (28), an operator intervention (57P: shutting
     * down, cannot connect now) or too many connections (53300).
     */
    static boolean unavailable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof DataAccessResourceFailureException || t instanceof TransientDataAccessResourceException
                    || t instanceof PermissionDeniedDataAccessException || t instanceof SQLTransientConnectionException
                    || t instanceof java.net.ConnectException
                    || t.getClass().getName().equals("com.zaxxer.hikari.pool.HikariPool$PoolInitializationException")) {
                return true;
            }
            if (t instanceof SQLException sql && sql.getSQLState() != null) {
                String state = sql.getSQLState();
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

    private static ResponseEntity<Object> answer(HttpStatus status, Object body) {
        return ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON).body(body);
    }
}
