package blocklab.peers.springwebflux;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * The seed's Spring WebFlux app: Spring Boot with spring-boot-starter-webflux
 * (Reactor Netty, Spring Boot's defaults). {@code /delay} does not block: it
 * answers after {@code Mono.delay} (a timer on Reactor's parallel scheduler)
 * with a POJO that Jackson writes as {@code {"success":true}}; {@code /test}
 * answers "works".
 *
 * <pre>java -jar spring-webflux.jar [--listen HOST:PORT] [--SPRING.PROPERTY=VALUE ...]</pre>
 *
 * Prints {@code listening on http://HOST:PORT} once Reactor Netty accepts
 * (port 0 picks a free one; the line gives the real port), and stops on
 * SIGTERM.
 */
@SpringBootApplication
@RestController
public class SpringWebFluxPeer {
    static final String NAME = "spring-webflux";
    static final long DEFAULT_MS = 5000;
    static final long MAX_MS = 600_000;

    /** What {@code /delay} answers; Jackson writes it as {@code {"success":true}}. */
    public record Success(boolean success) {
    }

    /** What a bad {@code ?ms=} gets, with status 400. */
    public record Failure(String error) {
    }

    @GetMapping("/test")
    public String test() {
        return "works";
    }

    @GetMapping("/delay")
    public Mono<ResponseEntity<Object>> delay(@RequestParam(name = "ms", required = false) String raw) {
        long ms = DEFAULT_MS;
        if (raw != null) {
            ms = parseMillis(raw);
            if (ms < 0) {
                return Mono.just(ResponseEntity.badRequest().contentType(MediaType.APPLICATION_JSON)
                    .body(new Failure("ms must be an integer from 0 to " + MAX_MS)));
            }
        }
        return Mono.delay(Duration.ofMillis(ms))
            .thenReturn(ResponseEntity.ok().contentType(MediaType.APPLICATION_JSON).body(new Success(true)));
    }

    /** {@code raw} as milliseconds from 0 to MAX_MS, or -1. */
    static long parseMillis(String raw) {
        try {
            long ms = Long.parseLong(raw.trim());
            return ms >= 0 && ms <= MAX_MS ? ms : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** Prints the 'listening on' line once the web server accepts, with its real port. */
    static final class Listening implements ApplicationListener<WebServerInitializedEvent> {
        private final String host;

        Listening(String host) {
            this.host = host;
        }

        @Override
        public void onApplicationEvent(WebServerInitializedEvent event) {
            System.out.println("listening on http://" + host + ":" + event.getWebServer().getPort());
            System.out.flush();
        }
    }

    public static void main(String[] args) {
        String listen = "127.0.0.1:8080";
        List<String> springArgs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--listen") && i + 1 < args.length) {
                listen = args[++i];
            } else if (arg.startsWith("--listen=")) {
                listen = arg.substring("--listen=".length());
            } else if (arg.equals("--help") || arg.equals("-h")) {
                System.out.println("usage: " + NAME + " [--listen HOST:PORT] [--SPRING.PROPERTY=VALUE ...]   (port 0 picks a free one)");
                System.exit(0);
            } else if (arg.startsWith("--server.address=") || arg.startsWith("--server.port=")) {
                fail("'" + arg + "': the address is set with --listen HOST:PORT");
            } else if (arg.matches("--[A-Za-z][\\w-]*(\\.[\\w\\[\\]-]+)+=.*")) {
                springArgs.add(arg); // a Spring property, e.g. --spring.reactor.netty.shutdown-quiet-period=0s
            } else {
                fail("unexpected argument '" + arg + "' (usage: " + NAME + " [--listen HOST:PORT] [--SPRING.PROPERTY=VALUE ...])");
            }
        }
        int colon = listen.lastIndexOf(':');
        if (colon <= 0) {
            fail("--listen takes HOST:PORT, got '" + listen + "'");
        }
        String host = listen.substring(0, colon);
        int port = -1;
        try {
            port = Integer.parseInt(listen.substring(colon + 1));
        } catch (NumberFormatException e) {
            // reported below
        }
        if (port < 0 || port > 65535) {
            fail("--listen: bad port in '" + listen + "'");
        }
        String address = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
        springArgs.add(0, "--server.address=" + address);
        springArgs.add(1, "--server.port=" + port);

        SpringApplication app = new SpringApplication(SpringWebFluxPeer.class);
        app.addListeners(new Listening(host));
        app.run(springArgs.toArray(new String[0]));
    }

    private static void fail(String message) {
        System.err.println(NAME + ": " + message);
        System.exit(2);
    }
}
