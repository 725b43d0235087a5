// Command go-pgx is the Go peer of study 1 on PostgreSQL: net/http's server, a
// goroutine per request, reading through pgx's pool (pgxpool).
//
//	go-pgx [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N]
//
// Go has one execution model, so each endpoint is the same one: the request's
// goroutine calls the pool's query, which looks blocking and parks the
// goroutine (not its OS thread) until PostgreSQL answers; the runtime's
// network poller runs other goroutines meanwhile. There is no blocking twin to
// write: /getData would be this very code.
//
//   - /getDataAsync: one read, the goroutine parked on it.
//   - /getDataAsync2: two reads in sequence, the second started when the first
//     completes; answers the second.
//   - /test: "works".
//
// Every read is `SELECT id, name, code, mime_type, content_type, body FROM
// content WHERE id = $1` of the id ?id= names, or a random one from 1 to
// --nodes, answered as {"id":…,"name":…,"code":…,"mimeType":…,
// "contentType":…,"body":…}; 400 for an id that is not an integer from 1 to
// --nodes, 404 for a row that is not there, 503 when PostgreSQL cannot be
// reached or refuses, 500 otherwise. pgx prepares the statement once per
// connection and caches it (its default QueryExecModeCacheStatement).
//
// The pool connects lazily (the server starts, and answers 503, without a
// database), each connection within 3 s; it holds at most --pool connections
// (default: pgxpool's own, max(4, CPUs)). The user comes from the URL, else
// PGUSER (default postgres); the password only from PGPASSWORD (a command
// line is public: a --db carrying one is refused, and no message quotes it).
// Each connection's application_name is "go-pgx". Prints "listening on
// http://HOST:PORT" once it accepts (port 0 picks a free one; the line gives
// the real port) and exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	name           = "go-pgx"
	query          = "SELECT id, name, code, mime_type, content_type, body FROM content WHERE id = $1"
	connectTimeout = 3 * time.Second
	usage          = "usage: " + name + " [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N]"
)

// options is the command line, validated.
type options struct {
	listen string
	host   string // the listen host, as the ready line shows it
	db     *url.URL
	nodes  int64
	pool   int32 // 0: pgxpool's default
}

// content is one row, its keys in blocklab's order.
type content struct {
	ID          int64  `json:"id"`
	Name        string `json:"name"`
	Code        string `json:"code"`
	MimeType    string `json:"mimeType"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
}

// problem is a request answered with an error: its status and public message.
type problem struct {
	status  int
	message string
}

func (p *problem) Error() string { return p.message }

// store is the pool of one PostgreSQL and the one read made with it.
type store struct {
	pool  *pgxpool.Pool
	nodes int64
}

func main() {
	opts := parseArgs(os.Args[1:])
	config, err := poolConfig(opts)
	if err != nil {
		fail(err.Error())
	}
	// NewWithConfig opens no connection (MinConns is 0): the first read does.
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	if err != nil {
		fail(fmt.Sprintf("--db: %v", err))
	}
	db := &store{pool: pool, nodes: opts.nodes}

	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot listen on %s: %v\n", name, opts.listen, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /test", test)
	mux.HandleFunc("GET /getDataAsync", db.getDataAsync)
	mux.HandleFunc("GET /getDataAsync2", db.getDataAsync2)
	server := &http.Server{Handler: mux}

	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()

	fmt.Printf("listening on http://%s:%d\n", opts.host, ln.Addr().(*net.TCPAddr).Port)

	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	case <-stop.Done():
		// Stop at once: the listener and every connection, even with requests
		// in flight; then close the pool's connections, waiting at most 2 s
		// for those still lent to a query.
		_ = server.Close()
		closed := make(chan struct{})
		go func() { pool.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
		}
	}
}

// poolConfig is pgxpool's configuration for opts: the driver's defaults but
// for the user, the password, the connect timeout, the application name and
// the pool's size.
func poolConfig(opts options) (*pgxpool.Config, error) {
	user := opts.db.User.Username()
	if user == "" {
		user = os.Getenv("PGUSER")
	}
	if user == "" {
		user = "postgres"
	}
	database := strings.TrimPrefix(opts.db.Path, "/")
	if database == "" {
		database = user // libpq's default
	}
	// A URL without a password: pgx would take PGPASSWORD from the environment
	// itself, and .pgpass when it is unset; the password is set below instead.
	plain := &url.URL{Scheme: "postgres", User: url.User(user), Host: opts.db.Host, Path: "/" + database}
	config, err := pgxpool.ParseConfig(plain.String())
	if err != nil {
		return nil, fmt.Errorf("--db: %v", err)
	}
	config.ConnConfig.Password = os.Getenv("PGPASSWORD") // only from the environment
	config.ConnConfig.ConnectTimeout = connectTimeout
	config.ConnConfig.RuntimeParams["application_name"] = name
	if opts.pool > 0 {
		config.MaxConns = opts.pool
	}
	return config, nil
}

// test answers "works": the liveness check, no I/O.
func test(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("works"))
}

// getDataAsync reads one row; the request's goroutine parks on the query.
func (s *store) getDataAsync(w http.ResponseWriter, r *http.Request) {
	id, err := s.requestedID(r)
	if err == nil {
		var row *content
		row, err = s.read(r.Context(), id)
		if err == nil {
			writeRow(w, row)
			return
		}
	}
	writeProblem(w, err)
}

// getDataAsync2 reads the row twice in sequence and answers the second read.
func (s *store) getDataAsync2(w http.ResponseWriter, r *http.Request) {
	id, err := s.requestedID(r)
	if err == nil {
		if _, err = s.read(r.Context(), id); err == nil {
			var row *content
			row, err = s.read(r.Context(), id)
			if err == nil {
				writeRow(w, row)
				return
			}
		}
	}
	writeProblem(w, err)
}

// requestedID is ?id=N when given (an integer from 1 to nodes), else a random id in 1..=nodes.
func (s *store) requestedID(r *http.Request) (int64, error) {
	query := r.URL.Query()
	if !query.Has("id") {
		return 1 + rand.Int64N(s.nodes), nil
	}
	raw := query.Get("id")
	id, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || id < 1 || id > s.nodes {
		if len(raw) > 40 {
			raw = raw[:40]
		}
		return 0, &problem{http.StatusBadRequest, fmt.Sprintf("id must be an integer from 1 to %d, got '%s'", s.nodes, raw)}
	}
	return id, nil
}

// read is the one query: it acquires a pooled connection (parking while all
// are lent), runs the prepared statement and scans the row.
func (s *store) read(ctx context.Context, id int64) (*content, error) {
	var row content
	err := s.pool.QueryRow(ctx, query, id).Scan(&row.ID, &row.Name, &row.Code, &row.MimeType, &row.ContentType, &row.Body)
	switch {
	case err == nil:
		return &row, nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil, &problem{http.StatusNotFound, fmt.Sprintf("no content row with id %d", id)}
	case unavailable(err):
		return nil, &problem{http.StatusServiceUnavailable, "database unavailable: " + shorten(err.Error())}
	default:
		fmt.Fprintf(os.Stderr, "%s: query failed: %v\n", name, err)
		return nil, &problem{http.StatusInternalServerError, "database query failed"}
	}
}

// unavailable says whether err means PostgreSQL could not be reached, dropped
// the connection or refused it (503), rather than a failed query (500).
func unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "28"),  // invalid authorization
			strings.HasPrefix(pgErr.Code, "57P"), // shutting down, cannot connect now
			pgErr.Code == "53300",                // too many connections
			pgErr.Code == "3D000":                // no such database
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

func writeRow(w http.ResponseWriter, row *content) {
	body, err := json.Marshal(row)
	if err != nil {
		writeProblem(w, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func writeProblem(w http.ResponseWriter, err error) {
	var p *problem
	if !errors.As(err, &p) {
		p = &problem{http.StatusInternalServerError, "internal error"}
	}
	body, _ := json.Marshal(map[string]string{"error": p.message})
	writeJSON(w, p.status, body)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func shorten(text string) string {
	if len(text) > 200 {
		return text[:200]
	}
	return text
}

// parseArgs is the validated command line; one line on stderr and exit 2 on a bad one.
func parseArgs(args []string) options {
	values := map[string]string{
		"--listen": "127.0.0.1:8080",
		"--db":     "postgres://127.0.0.1:5432/blocklab",
		"--nodes":  "10000",
		"--pool":   "",
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--help" || arg == "-h" {
			fmt.Println(usage)
			os.Exit(0)
		}
		key, value, hasValue := strings.Cut(arg, "=")
		if _, known := values[key]; !known {
			fail(fmt.Sprintf("unexpected argument '%s' (%s)", redacted(arg), usage))
		}
		if !hasValue {
			if i+1 >= len(args) {
				fail(key + " needs a value")
			}
			i++
			value = args[i]
		}
		values[key] = value
	}

	var opts options
	opts.listen = values["--listen"]
	host, port, err := net.SplitHostPort(opts.listen)
	if number, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || number < 0 || number > 65535 {
		fail(fmt.Sprintf("--listen takes HOST:PORT, got '%s'", opts.listen))
	}
	opts.host = host
	if strings.Contains(host, ":") {
		opts.host = "[" + host + "]"
	}

	raw := values["--db"]
	db, err := url.Parse(raw)
	if err != nil {
		fail(fmt.Sprintf("--db takes postgres://[USER@]HOST:PORT/DATABASE, got '%s'", redacted(raw)))
	}
	if _, has := db.User.Password(); has {
		fail(fmt.Sprintf("--db carries a password: give it as PGPASSWORD in the environment, never on the command line (got '%s')", redacted(raw)))
	}
	if (db.Scheme != "postgres" && db.Scheme != "postgresql") || db.Hostname() == "" || db.Port() == "" ||
		strings.Contains(strings.TrimPrefix(db.Path, "/"), "/") || db.RawQuery != "" || db.Fragment != "" {
		fail(fmt.Sprintf("--db takes postgres://[USER@]HOST:PORT/DATABASE, got '%s'", redacted(raw)))
	}
	if number, perr := strconv.Atoi(db.Port()); perr != nil || number < 1 || number > 65535 {
		fail(fmt.Sprintf("--db: bad port in '%s'", redacted(raw)))
	}
	opts.db = db

	nodes, err := strconv.ParseInt(values["--nodes"], 10, 64)
	if err != nil || nodes < 1 {
		fail(fmt.Sprintf("--nodes takes a positive integer, got '%s'", values["--nodes"]))
	}
	opts.nodes = nodes

	if raw := values["--pool"]; raw != "" {
		size, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || size < 1 {
			fail(fmt.Sprintf("--pool takes a positive integer, got '%s'", raw))
		}
		opts.pool = int32(size)
	}
	return opts
}

// redacted is text with everything between a URL's :// and its last @ (a user
// and a password) replaced by ***; without a scheme, everything before the last @.
func redacted(text string) string {
	at := strings.LastIndex(text, "@")
	if at < 0 {
		return text
	}
	start := 0
	if scheme := strings.Index(text, "://"); scheme >= 0 && scheme < at {
		start = scheme + 3
	}
	return text[:start] + "***" + text[at:]
}

func fail(message string) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, message)
	os.Exit(2)
}
