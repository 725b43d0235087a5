package blocklab.play;

import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

import akka.pattern.AskTimeoutException;
import org.neo4j.driver.exceptions.AuthenticationException;
import org.neo4j.driver.exceptions.ClientException;
import org.neo4j.driver.exceptions.ServiceUnavailableException;
import org.neo4j.driver.exceptions.SessionExpiredException;
import org.neo4j.driver.exceptions.TransientException;

/**
 * Why a request got no data, with the status and message blocklab's server gives for the
 * same failure: 404 for a node that is not there, 503 for a database that cannot be reached
 * or refuses the credentials (or an actor that did not answer in time), 500 otherwise
 * (without internal detail).
 */
final class GraphError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    final int status;
    final String publicMessage;

    private GraphError(int status, String publicMessage, String detail, Throwable cause) {
        super(detail, cause, false, false);
        this.status = status;
        this.publicMessage = publicMessage;
    }

    static GraphError notFound(long id) {
        String message = "no Content node with id " + id;
        return new GraphError(404, message, message, null);
    }

    static GraphError malformed(Throwable cause) {
        return new GraphError(500, "database query failed", "malformed node: " + cause, cause);
    }

    /** Any failure of a read or an ask, classified. */
    static GraphError of(String target, Throwable error) {
        Throwable e = unwrap(error);
        if (e instanceof GraphError graphError) {
            return graphError;
        }
        if (e instanceof ServiceUnavailableException || e instanceof SessionExpiredException
                || e instanceof TransientException || e instanceof AuthenticationException
                || isAcquisitionTimeout(e)) {
            String message = "database unavailable: " + target + ": " + shorten(String.valueOf(e.getMessage()));
            return new GraphError(503, message, message, e);
        }
        if (e instanceof AskTimeoutException) {
            String message = "no reply from the actor within 30s";
            return new GraphError(503, message, message, e);
        }
        if (e instanceof TimeoutException) {
            String message = "no reply from the actor within 5s";
            return new GraphError(503, message, message, e);
        }
        return new GraphError(500, "database query failed", "query failed: " + e, e);
    }

    static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    /** The 4.4 driver reports a full pool that stayed full as a ClientException. */
    private static boolean isAcquisitionTimeout(Throwable e) {
        return e instanceof ClientException && String.valueOf(e.getMessage()).contains("acquire");
    }

    private static String shorten(String text) {
        return text.length() <= 200 ? text : text.substring(0, 200);
    }
}
