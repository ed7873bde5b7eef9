// Package metrics is Jervis's Prometheus surface (prometheus/client_golang):
// queue depths, oldest waiting ages, failures by class and model usage read
// from the pipeline store at scrape time; stage latencies and poll results
// counted as they happen, through the hooks of the worker loop and the
// scheduler.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
)

// Metrics holds the registry and the instruments.
type Metrics struct {
	reg     *prometheus.Registry
	jobs    *prometheus.HistogramVec
	polls   *prometheus.CounterVec
	fetched *prometheus.CounterVec
}

// New registers the instruments and a collector that reads stats (the
// pipeline store's Stats) at each scrape.
func New(stats func(context.Context) (store.Stats, error), log *slog.Logger) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		jobs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jervis_job_duration_seconds", Help: "How long a stage's jobs take, by stage and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms .. 262 s
		}, []string{"stage", "outcome"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jervis_polls_total", Help: "Polls by connection and result (finished or failed).",
		}, []string{"connection", "result"}),
		fetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jervis_poll_documents_total", Help: "Documents polls fetched, and how many were new versions.",
		}, []string{"connection", "kind"}),
	}
	m.reg.MustRegister(m.jobs, m.polls, m.fetched, &statsCollector{stats: stats, log: log},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveJob is a worker.Config.Observe.
func (m *Metrics) ObserveJob(stage string, outcome worker.Outcome, took time.Duration) {
	m.jobs.WithLabelValues(stage, strings.ToLower(outcome.String())).Observe(took.Seconds())
}

// ObservePoll counts one poll of a connection: whether it failed, and the
// documents it fetched and the new versions among them.
func (m *Metrics) ObservePoll(connection string, failed bool, fetched, newVersions int) {
	result := "finished"
	if failed {
		result = "failed"
	}
	m.polls.WithLabelValues(connection, result).Inc()
	m.fetched.WithLabelValues(connection, "fetched").Add(float64(fetched))
	m.fetched.WithLabelValues(connection, "new_versions").Add(float64(newVersions))
}

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

var (
	descDocuments = prometheus.NewDesc("jervis_documents", "Source documents by client, source and state.", []string{"client", "source", "state"}, nil)
	descTasks     = prometheus.NewDesc("jervis_tasks", "Tasks by client, kind and state.", []string{"client", "kind", "state"}, nil)
	descOldest    = prometheus.NewDesc("jervis_oldest_waiting_seconds", "Age of the longest-waiting item of each queue.", []string{"queue"}, nil)
	descFailures  = prometheus.NewDesc("jervis_failures", "Quarantined documents and failed tasks by error class.", []string{"what", "class"}, nil)
	descCalls     = prometheus.NewDesc("jervis_model_calls_total", "Model calls of all tasks, by task kind.", []string{"kind"}, nil)
	descTokens    = prometheus.NewDesc("jervis_model_tokens_total", "Model tokens of all tasks, by task kind and direction.", []string{"kind", "direction"}, nil)
	descUp        = prometheus.NewDesc("jervis_store_up", "Whether the pipeline store answered the scrape.", nil, nil)
)

// statsCollector reads the store at scrape time, so the numbers are the
// store's, whichever process changed them.
type statsCollector struct {
	stats func(context.Context) (store.Stats, error)
	log   *slog.Logger
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDocuments, descTasks, descOldest, descFailures, descCalls, descTokens, descUp} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.stats(ctx)
	if err != nil {
		c.log.Error("metrics: read stats", "err", err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, g := range s.Groups {
		desc := descDocuments
		if g.Tasks {
			desc = descTasks
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(g.N), g.Client, g.Kind, g.State)
	}
	now := time.Now()
	for q, at := range s.OldestWaiting {
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, now.Sub(at).Seconds(), q)
	}
	for key, n := range s.Failures {
		what, class, _ := strings.Cut(key, ".")
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(n), what, class)
	}
	for kind, u := range s.ModelUsage {
		ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(u.ModelCalls), kind)
		ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, float64(u.PromptTokens), kind, "prompt")
		ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, float64(u.OutputTokens), kind, "output")
	}
}
