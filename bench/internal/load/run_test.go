package load

import (
	"testing"
	"time"
)

func TestTallyResult(t *testing.T) {
	var all Tally
	for round := range 2 {
		var lat []time.Duration
		for i := range 50 {
			lat = append(lat, time.Duration(round*50+i+1)*time.Millisecond)
		}
		all.Add(Tally{Window: time.Second, Latencies: lat, Errors: round, FirstError: map[int]string{1: "boom"}[round]})
	}
	r := all.Result()
	want := Result{Seconds: 2, Calls: 100, Errors: 1, FirstError: "boom", CallsPerSec: 50, P50: 50, P90: 90, P99: 99, Max: 100}
	if r != want {
		t.Errorf("Result() = %+v, want %+v", r, want)
	}
	if (&Tally{}).Result().Calls != 0 {
		t.Error("an empty tally has calls")
	}
}

func TestFindEvent(t *testing.T) {
	stream := []byte("id: 1\nretry: 5\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\r\n\r\n")
	if got := string(findEvent(stream, 7)); got != `{"jsonrpc":"2.0","id":7,"result":{}}` {
		t.Errorf("findEvent = %q", got)
	}
	if findEvent(stream, 8) != nil {
		t.Error("findEvent found an id that is not there")
	}
}
