package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

//go:embed static
var staticFS embed.FS

// Options configure a Console.
type Options struct {
	// AccessKey and SecretKey are the console's admin account
	// (consoleAccessKey/consoleSecretKey): brokers' requests are signed
	// with it and actions need an HTTP request authenticated with it.
	// Empty: requests go unsigned and every action is refused.
	AccessKey, SecretKey string
	// ClientOptions are extra options of the admin client the console
	// asks brokers with (TLS, a request timeout).
	ClientOptions []client.Opt
	// Logger receives the console's logs; nil discards them.
	Logger *zap.Logger
	// CacheFor is how long one collection of cluster, topic or group data
	// answers every viewer (1 s): brokers are asked at most that often
	// however many browsers poll.
	CacheFor time.Duration
	// ReadTimeout bounds one collection's broker requests (2 s).
	ReadTimeout time.Duration
	// TransferWait is how long an action waits for the name server to
	// route a new leader (5 s).
	TransferWait time.Duration
	// AllowedHosts are the names besides localhost and the monitoring
	// port's bind address that requests may carry in Host
	// (consoleAllowedHosts; "*" allows any): the names of a proxy in
	// front, or the host's own name. An IP address is always allowed.
	AllowedHosts []string
}

// Console serves the web console and its JSON API for one name server.
// Build it with New, mount it with Mount (or serve Handler), Close it when
// the name server stops.
type Console struct {
	ns   *namesrv.NameServer
	opts Options
	log  *zap.Logger
	mux  *http.ServeMux

	adminMu sync.Mutex
	admin   *client.Admin

	cluster cache[*ClusterView]
	topics  rateCache[*TopicsView]
	groups  rateCache[*GroupsView]

	// actionMu serialises actions: two balance runs at once would plan
	// from the same stale view.
	actionMu sync.Mutex
	// authWarn bounds the warnings of refused credentials.
	authWarn remoting.WarnLimiter
	// logins slows down guessing of the account per remote address.
	logins *loginLimiter
	// lookups holds a token per message lookup in flight (maxLookups).
	lookups chan struct{}

	// memberIDs remembers which Raft id answered from a registered
	// address ("cluster/brokerName/addr"), to show a member that stopped
	// answering as one row (mergeDownMembers).
	memberMu  sync.Mutex
	memberIDs map[string]string
}

// New builds a console over ns. Nothing is served until Mount or Handler.
func New(ns *namesrv.NameServer, opts Options) (*Console, error) {
	if ns == nil {
		return nil, errors.New("console: nil name server")
	}
	// The account is an admin account of the brokers' plain_acl.yml (or
	// their cluster account), which take no key of 6 characters or fewer;
	// shorter keys guard the actions with a guessable password.
	if err := (remoting.Credentials{AccessKey: opts.AccessKey, SecretKey: opts.SecretKey}).CheckConfigured("consoleAccessKey", "consoleSecretKey"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentials, err)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.CacheFor <= 0 {
		opts.CacheFor = time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 2 * time.Second
	}
	if opts.TransferWait <= 0 {
		opts.TransferWait = 5 * time.Second
	}
	c := &Console{ns: ns, opts: opts, log: opts.Logger, lookups: make(chan struct{}, maxLookups), logins: newLoginLimiter()}
	c.mux = http.NewServeMux()
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /console/", http.StripPrefix("/console/", http.FileServerFS(static)))
	c.mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	c.mux.HandleFunc("GET /api/cluster", c.serveCluster)
	c.mux.HandleFunc("GET /api/topics", c.serveTopics)
	c.mux.HandleFunc("GET /api/groups", c.serveGroups)
	c.mux.HandleFunc("GET /api/message", c.serveMessage)
	c.mux.HandleFunc("GET /api/auth", c.serveAuth)
	c.mux.HandleFunc("POST /api/raft/transfer", c.serveTransfer)
	c.mux.HandleFunc("POST /api/raft/balance", c.serveBalance)
	return c, nil
}

// Handler serves /console/ (the page), / (a redirect to it) and /api/,
// refusing a Host that does not name the console (hostCheck).
func (c *Console) Handler() http.Handler { return securityHeaders(c.hostCheck(c.mux)) }

// Mount serves the console on the name server's monitoring port. It
// fails with ErrNoHTTP when that port is off.
func (c *Console) Mount() error {
	h := c.Handler()
	for _, p := range []string{"/console/", "/api/", "/{$}"} {
		if !c.ns.HandleHTTP(p, h) {
			return ErrNoHTTP
		}
	}
	return nil
}

// Close releases the admin client's connections. A nil Console (none
// mounted) closes as a no-op.
func (c *Console) Close() error {
	if c == nil {
		return nil
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if c.admin == nil {
		return nil
	}
	err := c.admin.Close(context.Background())
	c.admin = nil
	return err
}

// client returns the admin client, built on first use: the name server's
// listen address is known only once it started.
func (c *Console) client() (*client.Admin, error) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if c.admin != nil {
		return c.admin, nil
	}
	a := c.ns.Addr()
	if a == nil {
		return nil, ErrNotStarted
	}
	opts := []client.Opt{client.NameServers(dialable(a.String())), client.RequestTimeout(c.opts.TransferWait),
		client.WithLogger(c.log.Named("admin"))}
	if c.opts.AccessKey != "" {
		opts = append(opts, client.WithCredentials(c.opts.AccessKey, c.opts.SecretKey))
	}
	adm, err := client.NewAdmin(append(opts, c.opts.ClientOptions...)...)
	if err != nil {
		return nil, err
	}
	c.admin = adm
	return adm, nil
}

// dialable turns a wildcard listen address into the loopback one.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// securityHeaders keeps the page from being framed or sniffed: it shows
// the cluster and can act on it.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// apiError is every error answer's body.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg})
}

// cache holds one collection for Options.CacheFor; concurrent callers of
// a stale cache wait for one collection.
type cache[T any] struct {
	mu  sync.Mutex
	at  time.Time
	val T
}

func (k *cache[T]) get(ttl time.Duration, collect func() T) T {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.at.IsZero() && time.Since(k.at) < ttl {
		return k.val
	}
	k.val, k.at = collect(), time.Now()
	return k.val
}

// invalidate makes the next get collect (after an action).
func (k *cache[T]) invalidate() {
	k.mu.Lock()
	k.at = time.Time{}
	k.mu.Unlock()
}

// rateCache is a cache whose collections see the previous one, to turn
// offsets into rates.
type rateCache[T any] struct {
	mu   sync.Mutex
	at   time.Time
	val  T
	prev map[queueKey]sample
}

func (k *rateCache[T]) get(ttl time.Duration, collect func(prev map[queueKey]sample, now time.Time) (T, map[queueKey]sample)) T {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if !k.at.IsZero() && now.Sub(k.at) < ttl {
		return k.val
	}
	var next map[queueKey]sample
	k.val, next = collect(k.prev, now)
	k.prev, k.at = next, now
	return k.val
}

// queueKey names one queue of a topic (and a group, for consume rates).
type queueKey struct {
	group, topic, broker string
	queue                int32
}

// sample is one queue's offset at a time.
type sample struct {
	at     time.Time
	offset int64
}

// maxRateSpan is the longest gap between two collections that still
// gives a rate: the page shows the rate as the current one, and over a
// longer quiet spell (nobody polled) it would be that spell's average.
const maxRateSpan = time.Minute

// rate is messages per second between prev and (now, offset); -1 when
// there is no earlier sample to compare with, or only one older than
// maxRateSpan.
func rate(prev map[queueKey]sample, k queueKey, now time.Time, offset int64) float64 {
	p, ok := prev[k]
	if !ok {
		return -1
	}
	dt := now.Sub(p.at)
	if dt <= 0 || dt > maxRateSpan {
		return -1
	}
	return max(float64(offset-p.offset), 0) / dt.Seconds()
}
