package transport

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/fetchsession"
)

// Metrics holds the server's Prometheus collectors:
//
//	weir_requests_total{api}                     requests served (answered or not)
//	weir_request_errors_total{api}               requests that closed their connection
//	weir_request_duration_seconds{api}           time from decoding to the last byte written
//	weir_received_bytes_total, weir_sent_bytes_total
//	weir_connections                             open connections
//	weir_connections_rejected_total              closed at once for MaxConnections
//	weir_fetch_requests_total{session}           Fetch requests by session kind: sessionless,
//	                                             full (asking for a session), incremental, error
//	weir_fetch_sessions                          incremental fetch sessions cached
//	weir_fetch_session_partitions                partitions of the cached sessions
//	weir_fetch_session_evictions_total           sessions evicted to make room for new ones
//	weir_tls_fetch_path{listener,path,reason}    1 per TLS listener: path "ktls" or "copy", and why
//	                                             not kTLS (the self-test's reason, "off")
//	weir_ktls_connections_total{result}          TLS connections of kTLS listeners by what they got:
//	                                             "ktls", or "copy" (TLS_TX refused for the connection)
//
// (The node registers the partition metrics.) A nil *Metrics counts nothing.
type Metrics struct {
	requests [numKeys]prometheus.Counter
	failures [numKeys]prometheus.Counter
	latency  [numKeys]prometheus.Observer
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	conns    prometheus.Gauge
	rejected prometheus.Counter

	fetchKinds    [fetchsession.Failed + 1]prometheus.Counter
	sessions      prometheus.Gauge
	sessionParts  prometheus.Gauge
	sessionEvicts prometheus.Counter

	fetchPath *prometheus.GaugeVec
	ktlsConns [2]prometheus.Counter // [0] ktls, [1] copy
}

// NewMetrics creates the collectors and registers them with reg (when not
// nil); registering twice with one registry panics, as MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_requests_total", Help: "Kafka requests served, by API.",
	}, []string{"api"})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_request_errors_total", Help: "Kafka requests that closed their connection (undecodable, unsupported, failed write), by API.",
	}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_request_duration_seconds",
		Help:    "Time from decoding a request to writing its response (long polls included), by API.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10), // 50µs .. 13s
	}, []string{"api"})
	m := &Metrics{
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_received_bytes_total", Help: "Request bytes received, size prefixes included.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_sent_bytes_total", Help: "Response bytes sent, size prefixes included.",
		}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_connections", Help: "Open client connections.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_connections_rejected_total", Help: "Connections closed at once because MaxConnections were open.",
		}),
	}
	fetchKinds := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_fetch_requests_total",
		Help: "Fetch requests by session kind: sessionless, full (asking for a session), incremental, error (unknown session or wrong epoch).",
	}, []string{"session"})
	for k := range m.fetchKinds {
		m.fetchKinds[k] = fetchKinds.WithLabelValues(fetchsession.Kind(k).String())
	}
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "weir_fetch_sessions", Help: "Incremental fetch sessions cached (KIP-227).",
	})
	m.sessionParts = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "weir_fetch_session_partitions", Help: "Partitions of the cached fetch sessions.",
	})
	m.sessionEvicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_fetch_session_evictions_total", Help: "Fetch sessions evicted from the cache to make room for new ones.",
	})
	m.fetchPath = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "weir_tls_fetch_path",
		Help: "1 per TLS listener: how Fetch sends record bytes (path ktls: sendfile through the kernel's TLS; copy: through crypto/tls) and why not kTLS.",
	}, []string{"listener", "path", "reason"})
	ktlsConns := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_ktls_connections_total",
		Help: "TLS connections of listeners using kTLS, by what they got: ktls, or copy (the kernel refused TLS_TX for the connection: TLS 1.2, cipher).",
	}, []string{"result"})
	m.ktlsConns[0] = ktlsConns.WithLabelValues("ktls")
	m.ktlsConns[1] = ktlsConns.WithLabelValues("copy")
	// Resolve every served API's series once, so that counting a request
	// neither hashes labels nor allocates.
	for _, a := range apis {
		name := kmsg.NameForKey(a.key)
		m.requests[a.key] = requests.WithLabelValues(name)
		m.failures[a.key] = failures.WithLabelValues(name)
		m.latency[a.key] = latency.WithLabelValues(name)
	}
	if reg != nil {
		reg.MustRegister(requests, failures, latency, m.bytesIn, m.bytesOut, m.conns, m.rejected,
			fetchKinds, m.sessions, m.sessionParts, m.sessionEvicts, m.fetchPath, ktlsConns)
	}
	return m
}

func (m *Metrics) request(key int16, d time.Duration, failed bool) {
	if m == nil || m.requests[key] == nil {
		return
	}
	m.requests[key].Inc()
	m.latency[key].Observe(d.Seconds())
	if failed {
		m.failures[key].Inc()
	}
}

func (m *Metrics) received(n int) {
	if m != nil {
		m.bytesIn.Add(float64(n))
	}
}

func (m *Metrics) sent(n int) {
	if m != nil {
		m.bytesOut.Add(float64(n))
	}
}

func (m *Metrics) connOpened() {
	if m != nil {
		m.conns.Inc()
	}
}

func (m *Metrics) connClosed() {
	if m != nil {
		m.conns.Dec()
	}
}

func (m *Metrics) connRejected() {
	if m != nil {
		m.rejected.Inc()
	}
}

// fetchKind counts a Fetch request by its session kind.
func (m *Metrics) fetchKind(k fetchsession.Kind) {
	if m != nil {
		m.fetchKinds[k].Inc()
	}
}

// fetchSessions reports the session cache's state; evicted is the
// evictions since the last report.
func (m *Metrics) fetchSessions(st fetchsession.Stats, evicted int64) {
	if m != nil {
		m.sessions.Set(float64(st.Sessions))
		m.sessionParts.Set(float64(st.Partitions))
		m.sessionEvicts.Add(float64(evicted))
	}
}

// tlsFetchPath records a TLS listener's Fetch path.
func (m *Metrics) tlsFetchPath(listener string, p fetchPath) {
	if m != nil {
		path := "copy"
		if p.ktls {
			path = "ktls"
		}
		m.fetchPath.WithLabelValues(listener, path, p.reason).Set(1)
	}
}

// ktlsConn counts a kTLS listener's connection by whether it got kTLS.
func (m *Metrics) ktlsConn(ok bool) {
	if m != nil {
		if ok {
			m.ktlsConns[0].Inc()
		} else {
			m.ktlsConns[1].Inc()
		}
	}
}
