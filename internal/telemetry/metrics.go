package telemetry

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// seriesKey is what an operation's histogram series is told apart by:
// the conventions' attributes, and the backend of a client op. Every one
// is bounded by the configuration, never a URI, an id or an identity.
type seriesKey struct {
	client                                bool
	method, tool, prompt, errType, status string
	protocol, transport, backend          string
}

// maxSeries bounds the attribute sets kept for reuse; beyond it, a set is
// made for each record (backends choose their error codes).
const maxSeries = 4096

// seriesSets keeps the attribute set of each series recorded: making one
// (sorting, hashing) costs more than the record itself.
type seriesSets struct {
	m sync.Map // seriesKey → attribute.Set
	n sync.Mutex
	k int
}

// record adds an operation that took seconds to its histogram.
func (t *Telemetry) record(key seriesKey, seconds float64) {
	set, ok := t.series.m.Load(key)
	if !ok {
		s := key.set()
		set = s
		t.series.n.Lock()
		if t.series.k < maxSeries {
			if _, loaded := t.series.m.LoadOrStore(key, s); !loaded {
				t.series.k++
			}
		}
		t.series.n.Unlock()
	}
	// No exemplars: the background, not the op's span.
	if key.client {
		t.clientOp.RecordSet(context.Background(), seconds, set.(attribute.Set))
	} else {
		t.serverOp.RecordSet(context.Background(), seconds, set.(attribute.Set))
	}
}

// set is the key's attributes.
func (k seriesKey) set() attribute.Set {
	a := make([]attribute.KeyValue, 0, 9)
	str := func(key attribute.Key, v string) {
		if v != "" {
			a = append(a, key.String(v))
		}
	}
	str(semconv.McpMethodNameKey, k.method)
	str(semconv.ErrorTypeKey, k.errType)
	str(semconv.RPCResponseStatusCodeKey, k.status)
	str(semconv.GenAIToolNameKey, k.tool)
	str(semconv.GenAIPromptNameKey, k.prompt)
	if k.method == "tools/call" {
		a = append(a, semconv.GenAIOperationNameExecuteTool)
	}
	str(semconv.McpProtocolVersionKey, k.protocol)
	str(semconv.NetworkTransportKey, k.transport)
	str(Backend, k.backend)
	return attribute.NewSet(a...)
}
