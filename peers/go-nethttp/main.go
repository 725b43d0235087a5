// Command go-nethttp is the Go peer of study 2: net/http's server, a goroutine
// per connection, whose /delay handler blocks its goroutine in time.Sleep
// (the goroutine-per-request analogue of Spring Web's Thread.sleep).
//
//	go-nethttp [--listen HOST:PORT]
//
// GET /test answers "works"; GET /delay?ms=N sleeps N ms (0 to 600000, default
// 5000; anything else is a 400) and answers {"success":true}. It prints
// "listening on http://HOST:PORT" once it accepts (port 0 picks a free one;
// the line gives the real port) and stops on SIGTERM or SIGINT. Only the
// standard library; net/http's defaults (no timeouts, no connection limit).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	name      = "go-nethttp"
	defaultMS = 5000
	maxMS     = 600_000
	usage     = "usage: " + name + " [--listen HOST:PORT]   (port 0 picks a free one)"
)

func main() {
	listen := "127.0.0.1:8080"
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "--listen" && i+1 < len(args):
			i++
			listen = args[i]
		case strings.HasPrefix(arg, "--listen="):
			listen = strings.TrimPrefix(arg, "--listen=")
		case arg == "--help" || arg == "-h":
			fmt.Println(usage)
			os.Exit(0)
		default:
			fail(fmt.Sprintf("unexpected argument '%s' (%s)", arg, usage))
		}
	}
	colon := strings.LastIndex(listen, ":")
	if colon <= 0 {
		fail(fmt.Sprintf("--listen takes HOST:PORT, got '%s'", listen))
	}
	host := listen[:colon]
	if port, err := strconv.Atoi(listen[colon+1:]); err != nil || port < 0 || port > 65535 {
		fail(fmt.Sprintf("--listen: bad port in '%s'", listen))
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot listen on %s: %v\n", name, listen, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /test", test)
	mux.HandleFunc("GET /delay", delay)
	server := &http.Server{Handler: mux}

	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()

	fmt.Printf("listening on http://%s:%d\n", host, ln.Addr().(*net.TCPAddr).Port)

	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	case <-stop.Done():
		// Stop at once: close the listener and every connection, even with
		// requests in flight (their sleeping goroutines die with the process).
		if err := server.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "%s: stopping: %v\n", name, err)
		}
	}
}

// test answers "works": the liveness check, no I/O.
func test(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("works"))
}

// delay blocks its goroutine for ?ms= milliseconds, then answers {"success":true}.
func delay(w http.ResponseWriter, r *http.Request) {
	ms := int64(defaultMS)
	if query := r.URL.Query(); query.Has("ms") {
		parsed, err := strconv.ParseInt(strings.TrimSpace(query.Get("ms")), 10, 64)
		if err != nil || parsed < 0 || parsed > maxMS {
			writeJSON(w, http.StatusBadRequest, fmt.Sprintf(`{"error":"ms must be an integer from 0 to %d"}`, maxMS))
			return
		}
		ms = parsed
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	writeJSON(w, http.StatusOK, `{"success":true}`)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func fail(message string) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, message)
	os.Exit(2)
}
