package blocklab.play;

import java.net.URI;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

import org.neo4j.driver.AuthToken;
import org.neo4j.driver.AuthTokens;
import org.neo4j.driver.Config;
import org.neo4j.driver.Driver;
import org.neo4j.driver.GraphDatabase;
import org.neo4j.driver.Logging;
import org.neo4j.driver.Record;
import org.neo4j.driver.Session;
import org.neo4j.driver.Value;
import org.neo4j.driver.Values;
import org.neo4j.driver.async.AsyncSession;
import org.neo4j.driver.async.ResultCursor;

/**
 * The Neo4j side: one driver for the application (as the seed's static driver), and the one
 * read two ways, as the seed's GraphAPI did it: a synchronous session that holds the calling
 * thread for the round trip, and an async session that returns a CompletionStage.
 *
 * <p>The query is blocklab's ({@code CONTENT_QUERY}), so both servers do the same work per
 * request; the seed's was {@code MATCH (n) RETURN n LIMIT 1}.
 */
final class Graph {

    static final String QUERY = "MATCH (n:Content {id: $id}) RETURN n";

    /** Connections of the driver's pool (the 4.4 driver's default, and the 1.7 driver's). */
    static final int POOL = 100;

    private final Driver driver;
    private final String target;

    private Graph(Driver driver, String target) {
        this.driver = driver;
        this.target = target;
    }

    /** The driver connects lazily: the server starts (and answers 503) without a database. */
    static Graph open(URI db) {
        Config config = Config.builder()
                .withMaxConnectionPoolSize(POOL)
                .withLogging(Logging.slf4j())
                .build();
        String target = "bolt://" + db.getHost() + ":" + db.getPort();
        return new Graph(GraphDatabase.driver(db, authFromEnvironment(), config), target);
    }

    /**
     * The database's credentials, as blocklab reads them for itself: {@code NEO4J_PASSWORD}
     * with {@code NEO4J_USER} (default {@code neo4j}), or none when no password is set. From the
     * environment only: a command line is public ({@code ps}, {@code /proc/PID/cmdline}).
     */
    static AuthToken authFromEnvironment() {
        String password = System.getenv("NEO4J_PASSWORD");
        if (password == null) {
            return AuthTokens.none();
        }
        String user = System.getenv("NEO4J_USER");
        return AuthTokens.basic(user == null ? "neo4j" : user, password);
    }

    String target() {
        return target;
    }

    /** The blocking read: this thread waits for the whole round trip (the seed's getDataFromNeo4j). */
    Content readBlocking(long id) {
        try (Session session = driver.session()) {
            List<Record> records = session.run(QUERY, parameters(id)).list();
            return content(id, records);
        } catch (RuntimeException e) {
            throw GraphError.of(target, e);
        }
    }

    /**
     * The non-blocking read (the seed's getDataFromNeo4jAsync): the answer completes the
     * returned stage on the driver's event loop; the session is closed after that.
     */
    CompletionStage<Content> read(long id) {
        CompletableFuture<Content> result = new CompletableFuture<>();
        AsyncSession session;
        try {
            session = driver.asyncSession();
        } catch (RuntimeException e) {
            result.completeExceptionally(GraphError.of(target, e));
            return result;
        }
        session.runAsync(QUERY, parameters(id))
                .thenCompose(ResultCursor::listAsync)
                .whenComplete((records, error) -> {
                    try {
                        if (error != null) {
                            result.completeExceptionally(GraphError.of(target, error));
                        } else {
                            result.complete(content(id, records));
                        }
                    } catch (RuntimeException e) {
                        result.completeExceptionally(GraphError.of(target, e));
                    } finally {
                        session.closeAsync();
                    }
                });
        return result;
    }

    void close(long timeout, TimeUnit unit) {
        try {
            driver.closeAsync().toCompletableFuture().get(timeout, unit);
        } catch (Exception e) {
            System.err.println("play: closing the Neo4j driver: " + e);
        }
    }

    private static Value parameters(long id) {
        return Values.parameters("id", id);
    }

    private static Content content(long id, List<Record> records) {
        if (records.isEmpty()) {
            throw GraphError.notFound(id);
        }
        if (records.size() > 1) {
            throw GraphError.malformed(new IllegalStateException(records.size() + " nodes with id " + id));
        }
        return Content.from(records.get(0).get(0).asNode());
    }
}
