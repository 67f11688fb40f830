package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/registry"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/internal/jsonlog"
	"github.com/coord-sidecar/coord-sidecar/internal/logwriter"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Config is everything the command line and the environment set.
type Config struct {
	Listen         string
	ZK             []string
	ZKRoot         string
	SessionTimeout time.Duration
	// Token is one bearer token allowed everything (--token, COORD_TOKEN, or the
	// contents of --token-file / COORD_TOKEN_FILE).
	Token     string
	TokenFile string
	// TokensFile holds scoped tokens (docs/SECURITY.md), reloaded on SIGHUP.
	TokensFile string
	// AllowedHosts and AllowedOrigins are comma-separated; AllowedHosts empty
	// means the default of the listen address.
	AllowedHosts   string
	AllowedOrigins string
	// TLSCert and TLSKey turn on HTTPS; TLSClientCA makes client certificates
	// signed by it mandatory. The files are re-read when they change.
	TLSCert, TLSKey, TLSClientCA string
	// MaxLeases caps live leases; MaxConns caps open connections of the main
	// listener (at the cap, the longest-idle one is closed to make room).
	MaxLeases int
	MaxConns  int
	// IdleTimeout closes a kept-alive connection idle that long.
	IdleTimeout time.Duration
	// AdminListen, when set, is a listener of its own serving /healthz,
	// /readyz and /metrics only, outside MaxConns.
	AdminListen string
	// BodyTimeout is how long a client has to send a request body.
	BodyTimeout time.Duration
	MaxWait     time.Duration
	// SuspendWait is how long a request waits for a suspended ZooKeeper
	// connection to come back, and how long /readyz stays 200 through a
	// suspension; when neither the flag nor the environment sets it, the
	// session timeout (0 given: no wait).
	SuspendWait time.Duration
	MaxTTL      time.Duration
	DefaultTTL  time.Duration
	MaxBody     int64
	MaxItem     int64
	MaxStreams  int
	MaxWaiters  int
	// ReadHeaderTimeout cuts off a client that trickles its request headers.
	ReadHeaderTimeout time.Duration
	LogLevel          string
	// StateDir keeps what a successor needs to resume (README, "Restarts and upgrades");
	// "" keeps nothing.
	StateDir string
	// ZKSecurity: ZooKeeper credentials and TLS (zksecurity.go).
	ZKSecurity
	// RecipeFlags are the values of the recipes' own flags (registry.Flags,
	// recipeflags.go) by name, as the command line or the environment set
	// them; a flag absent has its default.
	RecipeFlags map[string]string
}

// logInterval is the longest a log line waits to be written: lines are written
// in batches (logwriter), so that a request does not pay a write(2) for its log
// line before its answer goes out.
const logInterval = 50 * time.Millisecond

// Main is the program: ParseFlags, Run, Close. End-to-end tests drive it whole.
type Main struct {
	Config Config
	// LogOutput receives the structured logs (default os.Stderr).
	LogOutput io.Writer
	// Stdout receives the usage that --help asks for (default os.Stdout).
	Stdout io.Writer

	session  *zookeeper.Session
	leases   *kit.Leases
	server   *registry.Server
	http     *http.Server
	listener net.Listener
	served   chan error
	tokens   *tokens.Tokens
	log      *slog.Logger
	logOut   *logwriter.Batched // LogOutput, batched: see logInterval
	certs    *certFiles
	restarts *restarts // nil without --state-dir
	owner    *owner    // the session's record, with --state-dir (owner.go)
	// serving is the listener Serve accepts on; conns tracks the state of
	// every connection it accepted (upgrade.go).
	serving net.Listener
	conns   connStates

	// admin serves adminListener (--admin-listen; nil without), adminServed
	// gets its Serve's end (admin.go).
	admin         *http.Server
	adminListener net.Listener
	adminServed   chan error
	adminConns    connStates

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main with the contract's defaults.
func NewMain() *Main {
	return &Main{Config: Config{
		Listen: "127.0.0.1:8080", ZK: []string{"127.0.0.1:2181"}, ZKRoot: "/coord",
		SessionTimeout: 10 * time.Second, MaxWait: 5 * time.Minute, MaxTTL: time.Hour,
		DefaultTTL: 60 * time.Second, MaxBody: 1 << 20, MaxItem: 512 << 10, MaxStreams: 16384, MaxWaiters: 8192, ReadHeaderTimeout: 5 * time.Second, LogLevel: "info",
		MaxLeases: 100000, MaxConns: 32768, BodyTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second,
	}, LogOutput: os.Stderr, Stdout: os.Stdout}
}

// ParseFlags reads flags, each of which also comes from the environment
// (COORD_<NAME>); a flag given on the command line wins.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	c := &m.Config
	fs := flag.NewFlagSet("coord-sidecar", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; --help prints below
	fs.Usage = func() {}
	zk := strings.Join(c.ZK, ",")
	fs.StringVar(&c.Listen, "listen", env(getenv, "COORD_LISTEN", c.Listen), "HTTP listen address (COORD_LISTEN)")
	fs.StringVar(&zk, "zk", env(getenv, "COORD_ZK", zk), "ZooKeeper servers, comma-separated (COORD_ZK)")
	fs.StringVar(&c.ZKRoot, "zk-root", env(getenv, "COORD_ZK_ROOT", c.ZKRoot), "znode under which every recipe lives (COORD_ZK_ROOT)")
	fs.StringVar(&c.Token, "token", env(getenv, "COORD_TOKEN", c.Token), "one bearer token allowed everything on /v1; prefer COORD_TOKEN or --token-file, argv is visible to every local user (COORD_TOKEN)")
	fs.StringVar(&c.TokenFile, "token-file", env(getenv, "COORD_TOKEN_FILE", c.TokenFile), "file holding the --token token (COORD_TOKEN_FILE)")
	fs.StringVar(&c.TokensFile, "tokens-file", env(getenv, "COORD_TOKENS_FILE", c.TokensFile), `JSON {"tokens":[{"name","token","allow":["locks/app-*"],"readOnly"}]}, reloaded on SIGHUP (COORD_TOKENS_FILE)`)
	fs.StringVar(&c.AllowedHosts, "allowed-hosts", env(getenv, "COORD_ALLOWED_HOSTS", c.AllowedHosts), "Host values accepted, comma-separated, * for all (default: on loopback or a unix socket, localhost, 127.0.0.1, [::1] and the listen host; else all) (COORD_ALLOWED_HOSTS)")
	fs.StringVar(&c.AllowedOrigins, "allowed-origins", env(getenv, "COORD_ALLOWED_ORIGINS", c.AllowedOrigins), "browser origins accepted besides the sidecar's own, comma-separated (COORD_ALLOWED_ORIGINS)")
	fs.StringVar(&c.TLSCert, "tls-cert", env(getenv, "COORD_TLS_CERT", c.TLSCert), "PEM certificate (chain): serve HTTPS; re-read when it changes (COORD_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", env(getenv, "COORD_TLS_KEY", c.TLSKey), "PEM private key of --tls-cert (COORD_TLS_KEY)")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", env(getenv, "COORD_TLS_CLIENT_CA", c.TLSClientCA), "PEM CA bundle: clients must present a certificate it signed (COORD_TLS_CLIENT_CA)")
	fs.StringVar(&c.ZKAuth, "zk-auth", env(getenv, "COORD_ZK_AUTH", c.ZKAuth), "ZooKeeper credentials digest:user:password; nodes then get a creator-only ACL; prefer COORD_ZK_AUTH or --zk-auth-file, argv is visible to every local user (COORD_ZK_AUTH)")
	fs.StringVar(&c.ZKAuthFile, "zk-auth-file", env(getenv, "COORD_ZK_AUTH_FILE", c.ZKAuthFile), "file holding the --zk-auth credentials (COORD_ZK_AUTH_FILE)")
	fs.StringVar(&c.ZKTLSCA, "zk-tls-ca", env(getenv, "COORD_ZK_TLS_CA", c.ZKTLSCA), "PEM CA bundle: TLS to ZooKeeper's secure client port, servers verified against it (COORD_ZK_TLS_CA)")
	fs.StringVar(&c.ZKTLSCert, "zk-tls-cert", env(getenv, "COORD_ZK_TLS_CERT", c.ZKTLSCert), "PEM client certificate presented to ZooKeeper (COORD_ZK_TLS_CERT)")
	fs.StringVar(&c.ZKTLSKey, "zk-tls-key", env(getenv, "COORD_ZK_TLS_KEY", c.ZKTLSKey), "PEM private key of --zk-tls-cert (COORD_ZK_TLS_KEY)")
	if v := getenv("COORD_ZK_REQUIRE_ACL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("COORD_ZK_REQUIRE_ACL=%q: %w", v, err)
		}
		c.ZKRequireACL = b
	}
	fs.BoolVar(&c.ZKRequireACL, "zk-require-acl", c.ZKRequireACL, "with --zk-auth: stay unready while --zk-root or a recipe parent is open to anyone (world:anyone may more than read it), instead of only warning (COORD_ZK_REQUIRE_ACL)")
	fs.IntVar(&c.MaxLeases, "max-leases", c.MaxLeases, "most live leases; beyond, 429 too-many-leases (COORD_MAX_LEASES)")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "most open client connections; at the cap the longest-idle one is closed to make room, and a new one waits while none is idle (COORD_MAX_CONNS)")
	fs.StringVar(&c.AdminListen, "admin-listen", env(getenv, "COORD_ADMIN_LISTEN", c.AdminListen), "address of a listener of its own serving /healthz, /readyz and /metrics only, outside --max-conns, for probes and scrapers (COORD_ADMIN_LISTEN)")
	fs.StringVar(&c.StateDir, "state-dir", env(getenv, "COORD_STATE_DIR", c.StateDir), "directory (made 0700) where the sidecar keeps its ZooKeeper session and leases, so that a successor started on it resumes them: a restart then loses nothing (COORD_STATE_DIR)")
	fs.StringVar(&c.LogLevel, "log-level", env(getenv, "COORD_LOG_LEVEL", c.LogLevel), "debug, info, warn or error (COORD_LOG_LEVEL)")
	fs.Int64Var(&c.MaxBody, "max-body", c.MaxBody, "largest request body in bytes (COORD_MAX_BODY)")
	fs.Int64Var(&c.MaxItem, "max-item", c.MaxItem, "largest queue item in bytes, at most 1000000 (COORD_MAX_ITEM)")
	fs.IntVar(&c.MaxStreams, "max-streams", c.MaxStreams, "most event streams open at once (COORD_MAX_STREAMS)")
	fs.IntVar(&c.MaxWaiters, "max-waiters", c.MaxWaiters, "most long-polls under way at once (COORD_MAX_WAITERS)")
	durations := []struct {
		p          *time.Duration
		flag, envv string
		usage      string
	}{
		{&c.SessionTimeout, "session-timeout", "COORD_SESSION_TIMEOUT", "ZooKeeper session timeout"},
		{&c.SuspendWait, "suspend-wait", "COORD_SUSPEND_WAIT", "how long a request waits for a lost ZooKeeper connection to come back before it answers 503, and /readyz stays 200 meanwhile (default: --session-timeout)"},
		{&c.MaxWait, "max-wait", "COORD_MAX_WAIT", "largest wait= a request may ask"},
		{&c.MaxTTL, "max-ttl", "COORD_MAX_TTL", "largest ttl= a lease may ask"},
		{&c.DefaultTTL, "default-ttl", "COORD_DEFAULT_TTL", "ttl of a lease when ttl= is absent"},
		{&c.ReadHeaderTimeout, "read-header-timeout", "COORD_READ_HEADER_TIMEOUT", "time a client has to send its request headers"},
		{&c.BodyTimeout, "body-timeout", "COORD_BODY_TIMEOUT", "time a client has to send a request body"},
		{&c.IdleTimeout, "idle-timeout", "COORD_IDLE_TIMEOUT", "a kept-alive connection idle that long is closed"},
	}
	for _, d := range durations {
		if v := getenv(d.envv); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", d.envv, v, err)
			}
			*d.p = parsed
		}
		fs.DurationVar(d.p, d.flag, *d.p, d.usage+" ("+d.envv+")")
	}
	if err := c.numbersFromEnv(getenv); err != nil {
		return err
	}
	recipeFlags := addRecipeFlags(fs, getenv, registry.Flags())
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(m.Stdout, fs)
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unknown subcommand or argument %q", fs.Arg(0))
	}
	given := getenv("COORD_SUSPEND_WAIT") != ""
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "suspend-wait" })
	switch {
	case given && c.SuspendWait < 0:
		return fmt.Errorf("--suspend-wait %s: must not be negative", c.SuspendWait)
	case !given:
		c.SuspendWait = c.SessionTimeout
	}
	values, err := recipeFlags()
	if err != nil {
		return err
	}
	c.RecipeFlags = values
	return m.checkConfig(zk)
}

// numbersFromEnv sets the numeric settings given in the environment
// (COORD_MAX_BODY, ...); the flags, parsed after, win over them.
func (c *Config) numbersFromEnv(getenv func(string) string) error {
	for key, p := range map[string]any{"COORD_MAX_BODY": &c.MaxBody, "COORD_MAX_ITEM": &c.MaxItem,
		"COORD_MAX_STREAMS": &c.MaxStreams, "COORD_MAX_WAITERS": &c.MaxWaiters,
		"COORD_MAX_LEASES": &c.MaxLeases, "COORD_MAX_CONNS": &c.MaxConns} {
		if v := getenv(key); v != "" {
			if _, err := fmt.Sscan(v, p); err != nil {
				return fmt.Errorf("%s=%q: %w", key, v, err)
			}
		}
	}
	return nil
}

// checkConfig takes the parsed --zk list and refuses a configuration that
// cannot work, before anything starts.
func (m *Main) checkConfig(zk string) error {
	c := &m.Config
	c.ZK = nil
	for _, s := range strings.Split(zk, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.ZK = append(c.ZK, s)
		}
	}
	if len(c.ZK) == 0 {
		return errors.New("--zk: no ZooKeeper server given")
	}
	if !strings.HasPrefix(c.ZKRoot, "/") || (len(c.ZKRoot) > 1 && strings.HasSuffix(c.ZKRoot, "/")) {
		return fmt.Errorf("--zk-root %q: must be an absolute znode path without a trailing slash", c.ZKRoot)
	}
	if c.MaxItem <= 0 || c.MaxItem > 1000000 {
		return fmt.Errorf("--max-item %d: must be between 1 and 1000000 bytes (ZooKeeper's jute.maxbuffer)", c.MaxItem)
	}
	if c.DefaultTTL > c.MaxTTL || c.DefaultTTL < time.Second {
		return fmt.Errorf("--default-ttl %s: must be between 1s and --max-ttl %s", c.DefaultTTL, c.MaxTTL)
	}
	return m.checkTrust()
}

// checkTrust refuses limits, TLS files and tokens that do not go together, and
// tokens that do not load.
func (m *Main) checkTrust() error {
	c := &m.Config
	if c.MaxLeases < 1 || c.MaxConns < 1 || c.BodyTimeout <= 0 || c.IdleTimeout <= 0 {
		return errors.New("--max-leases, --max-conns, --body-timeout and --idle-timeout must be positive")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	if c.Token != "" && c.TokenFile != "" {
		return errors.New("--token and --token-file: give one of them")
	}
	if _, err := m.loadTokens(); err != nil {
		return err
	}
	if _, _, err := c.ZKSecurity.load(); err != nil {
		return err
	}
	return nil
}

// loadTokens reads the configured tokens: --token (or the --token-file's
// contents) allowed everything, and the --tokens-file's scoped ones.
func (m *Main) loadTokens() ([]tokens.Token, error) {
	c := m.Config
	var list []tokens.Token
	token := c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("--token-file %s: empty", c.TokenFile)
		}
	}
	if token != "" {
		list = append(list, tokens.Token{Name: tokens.AllTokenName, Token: token, Allow: []string{"*"}})
	}
	if c.TokensFile != "" {
		b, err := os.ReadFile(c.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file: %w", err)
		}
		scoped, err := tokens.ParseTokens(b, registry.TokenKinds())
		if err != nil {
			return nil, fmt.Errorf("--tokens-file %s: %w", c.TokensFile, err)
		}
		list = append(list, scoped...)
	}
	if _, err := tokens.NewTokens(list, registry.TokenKinds()); err != nil {
		return nil, err
	}
	return list, nil
}

// hasTokens tells whether any token source is configured: then /v1 needs a
// token, even when the sources hold none.
func (c Config) hasTokens() bool { return c.Token != "" || c.TokenFile != "" || c.TokensFile != "" }

// Reload re-reads the token files (what SIGHUP does). On an error the tokens in
// force stay, and the error is logged and returned. Certificates need no reload:
// they are re-read when their files change.
func (m *Main) Reload() error {
	if !m.Config.hasTokens() {
		return nil
	}
	list, err := m.loadTokens()
	if err == nil {
		err = m.tokens.Set(list)
	}
	if err != nil {
		m.log.Error("reload: the tokens in force stay", "err", err)
		return err
	}
	m.warnOversubscribed(list)
	m.log.Info("reload: tokens read", "tokens", len(list))
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func env(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// Run connects to ZooKeeper (in the background: the sidecar serves and reports
// unavailable until the session is up), binds the listener and serves. It returns
// once the listener is bound.
func (m *Main) Run(ctx context.Context) (err error) {
	c := m.Config
	log, err := m.startLog()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = m.logOut.Close() // what was logged before the failure is out before the caller exits
		}
	}()
	if err := m.startTokens(); err != nil {
		return err
	}
	network, address := "tcp", c.Listen
	if p, ok := strings.CutPrefix(c.Listen, "unix:"); ok {
		network, address = "unix", p
	}
	hosts := api.HostList(splitList(c.AllowedHosts))
	if len(hosts) == 0 {
		hosts = api.DefaultAllowedHosts(network, address)
	}
	tlsConfig, err := m.startTLS(log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	zkAuth, zkTLS, err := c.ZKSecurity.load()
	if err != nil {
		return err
	}
	inherited, inheritedAdmin, resume, err := m.prepareRestart(log, reg)
	if err != nil {
		return err
	}
	// Bind first, then resume: a port in use or a bad socket path fails the
	// start before the predecessor's session is touched.
	ln := inherited
	if ln == nil {
		if ln, err = listen(network, address); err != nil {
			m.closeRestarts(false)
			return err
		}
	}
	adminLn, err := m.listenAdmin(inheritedAdmin)
	if err != nil {
		_ = ln.Close()
		m.closeRestarts(false)
		return err
	}
	sess, err := zookeeper.NewSession(zookeeper.Config{
		Servers: c.ZK, Timeout: c.SessionTimeout, Root: c.ZKRoot, Logger: log, Registerer: reg,
		Auth: zkAuth, TLS: zkTLS, RequireACL: c.ZKRequireACL, Resume: resume,
		Incarnation: m.incarnation(),
	})
	if err != nil {
		_ = ln.Close()
		if adminLn != nil {
			_ = adminLn.Close()
		}
		m.closeRestarts(false)
		return err
	}
	m.session = sess
	m.leases = kit.NewLeases(sess, reg)
	var restored <-chan struct{}
	var state api.StateDir
	if m.restarts != nil {
		restored, state = m.claimed(sess, m.restarts.Restored()), m.restarts
	}
	m.server = registry.New(api.Options{
		Session: sess, Leases: m.leases, Restored: restored, State: state,
		Tokens: m.tokens, AllowedHosts: hosts, AllowedOrigins: splitList(c.AllowedOrigins),
		MaxLeases: c.MaxLeases, BodyTimeout: c.BodyTimeout,
		MaxWait: c.MaxWait, MaxTTL: c.MaxTTL, DefaultTTL: c.DefaultTTL, SuspendWait: c.SuspendWait,
		MaxBody: c.MaxBody, MaxItem: c.MaxItem, MaxStreams: c.MaxStreams, MaxWaiters: c.MaxWaiters,
		Spec: coordsidecar.OpenAPI, RecipeFlags: c.RecipeFlags,
		Registerer: reg, Gatherer: reg, Logger: log,
	})
	m.beginResume(sess)
	m.listener = ln
	ln = m.limit(ln, tlsConfig, log, reg)
	m.http = &http.Server{
		Handler:           framing(m.server.Handler()),
		BaseContext:       m.server.BaseContext,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         m.conns.track,
	}
	m.serving = ln
	m.served = make(chan error, 1)
	go func() { m.served <- m.http.Serve(ln) }()
	m.startAdmin(adminLn, log)
	log.Info("coord-sidecar serving", "listen", ln.Addr().String(), "network", network, "tls", tlsConfig != nil,
		"mtls", c.TLSClientCA != "", "tokens", m.tokens.Len(), "allowedHosts", []string(hosts), "zk", c.ZK, "root", c.ZKRoot,
		"zkAuth", zkAuth != nil, "zkTLS", zkTLS != nil, "zkRequireACL", c.ZKRequireACL)
	return nil
}

// limit is the main listener ln as Serve takes it: at most --max-conns
// connections, the longest-idle closed to make room at the cap (conns.go),
// counted in coord_http_connections; then TLS, with tlsConfig.
func (m *Main) limit(ln net.Listener, tlsConfig *tls.Config, log *slog.Logger, reg prometheus.Registerer) net.Listener {
	capWarn := &capWarning{log: log, max: m.Config.MaxConns}
	limited := limitListener(ln, m.Config.MaxConns, m.conns.reclaimIdle, func() { capWarn.reached(m.conns.idleCount()) })
	registerConnGauges(reg, limited, &m.conns)
	if tlsConfig == nil {
		return limited
	}
	return tls.NewListener(limited, tlsConfig)
}

// startLog opens the log (--log-level, batched to LogOutput) and returns it.
func (m *Main) startLog() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(m.Config.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", m.Config.LogLevel, err)
	}
	m.logOut = logwriter.New(m.LogOutput, logInterval)
	// The JSONHandler's lines, a request's formatted without its generic path.
	m.log = slog.New(jsonlog.New(m.logOut, &slog.HandlerOptions{Level: level}))
	return m.log, nil
}

// startTokens makes the tokens in force: none (no authentication) unless a
// token or a tokens file is given, checked against the registered token kinds.
func (m *Main) startTokens() error {
	m.tokens = tokens.New(registry.TokenKinds())
	if !m.Config.hasTokens() {
		return nil
	}
	list, err := m.loadTokens()
	if err != nil {
		return err
	}
	if err := m.tokens.Set(list); err != nil {
		return err
	}
	m.warnOversubscribed(list)
	return nil
}

// warnOversubscribed warns of each global cap the tokens' own caps (with the
// default shares of the tokens without) add up to more than: a token within
// its share may then find the cap used up by the others.
func (m *Main) warnOversubscribed(list []tokens.Token) {
	c := m.Config
	for _, what := range tokens.Oversubscribed(list, [tokens.NumShares]int{c.MaxLeases, c.MaxStreams, c.MaxWaiters}) {
		m.log.Warn("tokens: "+what+"; a token within its share may find the cap used up by the others", "tokensFile", c.TokensFile)
	}
}

// startTLS loads --tls-cert and its key (and --tls-client-ca) when given, kept
// current by m.certs; nil without --tls-cert.
func (m *Main) startTLS(log *slog.Logger) (*tls.Config, error) {
	c := m.Config
	if c.TLSCert == "" {
		return nil, nil
	}
	certs, err := newCertFiles(c.TLSCert, c.TLSKey, c.TLSClientCA, log)
	if err != nil {
		return nil, err
	}
	m.certs = certs
	return m.certs.config(), nil
}

// beginResume hands how a successor adopts each recipe's holds (the
// registry's, from the recipes' descriptors) to the leases, then, with
// --state-dir, begins the resume of the predecessor's session in the
// background: the adoptions are known before it begins (a saved hold whose
// kind has none is reported lost).
func (m *Main) beginResume(sess *zookeeper.Session) {
	for kind, a := range m.server.Adoptions() {
		m.leases.RegisterAdoption(kind, a)
	}
	if m.restarts != nil {
		m.restarts.start(sess, m.leases)
	}
}

// Fatal gets the error that must end the process at once, without Close (see
// Leave): a
// resumed session that could not be reconciled, which a successor is to
// take over as it is (closing it would free every hold). Nil without
// --state-dir (a nil channel never receives).
func (m *Main) Fatal() <-chan error {
	if m.restarts == nil {
		return nil
	}
	return m.restarts.Fatal()
}

// Leave ends the process's part without touching the ZooKeeper session or
// the state directory (for Fatal): the session is detached, never closed, and
// the log is written out.
func (m *Main) Leave() {
	if m.session != nil {
		m.session.Detach()
	}
	if m.logOut != nil {
		_ = m.logOut.Close()
	}
}

// Addr is the address the HTTP server listens on (after Run).
func (m *Main) Addr() string { return m.listener.Addr().String() }

// Close shuts down in order: end streams and long-polls, stop taking
// requests and answer those under way (stopHTTP), release everything the
// leases hold, close the ZooKeeper session. Later calls return the first
// call's result.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown() })
	return m.closeErr
}

func (m *Main) shutdown() error {
	if m.http == nil {
		return nil
	}
	defer m.logOut.Close()            // last, after the session's own lines
	err := m.stopHTTP(m.server.Close) // streams and long-polls answer as shutting down
	m.leases.Close()
	m.session.Close()
	m.leases.Wait()
	m.server.CloseRecipes()
	m.closeRestarts(true) // the session is closed: a successor has nothing to resume
	return err
}

// stopHTTP stops the HTTP side, in the one order a shutdown and an upgrade's
// hand-over share: end (the API server's Close or Drain) ends streams and
// long-polls, and from then on every answer closes its connection
// (Connection: close); then nothing more is accepted, and the connections
// already accepted are given up to 2 s to go quiet: each one idle for
// handOverIdle (a busy client's closes cleanly after its next answer, and one
// accepted brings its first request). net/http's Shutdown drops, unanswered,
// a request it reads after the shutdown began, and closes an idle kept-alive
// connection under a client that may be sending on it at that moment (no
// HTTP/1.1 server can close one without that race; Go's client retries only
// idempotent requests): waiting for quiet makes that a client silent for
// handOverIdle sending at the very moment of the close. The short requests
// under way are then answered (Shutdown, within 10 s). The admin listener
// (--admin-listen) stops beside the main one, the same way. It returns Shutdown's
// error, else Serve's if Serve had ended for another reason than its
// listener's close.
func (m *Main) stopHTTP(end func()) error {
	end()
	_ = m.serving.Close()
	m.closeAdmin()
	serr := <-m.served // Serve has returned: every accepted connection is tracked
	m.conns.wait(handOverIdle, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.http.Shutdown(ctx)
	m.stopAdmin()
	if err != nil {
		return err
	}
	if serr != nil && !errors.Is(serr, net.ErrClosed) && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return nil
}

// closeRestarts ends the state directory's saving, if any (see restarts.close).
func (m *Main) closeRestarts(ended bool) {
	if m.restarts != nil {
		m.restarts.close(ended)
	}
}

// prepareRestart takes the listening sockets a predecessor handed over (nil
// when none did: the main one, and the admin one) and, with --state-dir, the
// state directory (for an upgrade's successor, once the predecessor lets go
// of it) with the session to resume.
func (m *Main) prepareRestart(log *slog.Logger, reg prometheus.Registerer) (net.Listener, net.Listener, *transport.Resumable, error) {
	inherited, admin, tellTaken, err := inheritedListeners()
	if err != nil {
		return nil, nil, nil, err
	}
	if inherited != nil {
		tellTaken() // the predecessor now stops accepting and hands over
		log.Info("upgrade: took the listening socket from the predecessor", "listen", inherited.Addr().String())
	}
	if m.Config.StateDir == "" {
		return inherited, admin, nil, nil
	}
	if m.restarts, err = openRestarts(m.Config, inherited != nil, log, reg); err != nil {
		for _, l := range []net.Listener{inherited, admin} {
			if l != nil {
				l.Close()
			}
		}
		return nil, nil, nil, err
	}
	return inherited, admin, m.restarts.resume(), nil
}

// listenAdmin is the admin listener: the one a predecessor handed over, else
// --admin-listen's, bound now; nil without --admin-listen.
func (m *Main) listenAdmin(inherited net.Listener) (net.Listener, error) {
	if m.Config.AdminListen == "" {
		if inherited != nil {
			inherited.Close()
		}
		return nil, nil
	}
	if inherited != nil {
		return inherited, nil
	}
	ln, err := net.Listen("tcp", m.Config.AdminListen)
	if err != nil {
		return nil, fmt.Errorf("--admin-listen: %w", err)
	}
	return ln, nil
}

// framing closes the connection after the answer to a request read by its
// Transfer-Encoding (RFC 9112 §6.1): net/http reads such a request by its
// Transfer-Encoding alone, dropping a Content-Length sent with it without
// telling, and a proxy in front that went by the Content-Length may have
// sent what follows as the body of this one: it must not be served as a
// request. A chunked request without Content-Length loses only its
// connection's reuse.
func framing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// LeaseCount is how many leases the sidecar holds now (after Run).
func (m *Main) LeaseCount() int { return m.leases.Len() }
