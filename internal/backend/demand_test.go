package backend

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// An on-demand backend without a cached catalog starts once to fill the
// cache and then goes idle. A call that arrives during that start (as a
// socket-activated daemon's first client's call does) is answered by
// the child it waited for, which stays running: it is never admitted to
// a child that is about to be stopped.
func TestCallDuringTheCacheFillingStart(t *testing.T) {
	bins := testutil.Build(t)
	b := testBackend(t, bins.Fake, "--name", "t", "--handshake-delay", "300ms")
	b.cfg.Start = config.StartOnDemand
	b.cfg.StartWait = 30 * time.Second
	b.opts.CatalogCache = filepath.Join(t.TempDir(), "t.json")
	b.opts.GracePeriod = 100 * time.Millisecond
	var statuses testutil.Recorder[Status]
	b.opts.OnChange = func(b *Backend) { statuses.Add(b.Status()) }
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	if !statuses.Within(30*time.Second, func(sts []Status) bool { return len(sts) > 0 && sts[len(sts)-1].State == Starting }) {
		t.Fatalf("statuses %+v; want the start that fills the cache", statuses.All())
	}

	b.Wake() // as the gateway does before every call
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	adm, err := b.Admit(actx, true)
	if err != nil {
		t.Fatalf("admit during the start: %v", err)
	}
	defer adm.Done("ok")
	if _, err := adm.Conn.Call(actx, "tools/call", []byte(`{"name":"echo","arguments":{"text":"hi"}}`)); err != nil {
		t.Fatalf("the call admitted during the start: %v (statuses %+v)", err, statuses.All())
	}
	if st := b.Status(); st.State != Healthy || adm.Conn.ended() {
		t.Errorf("after the call the backend is %s; want it still running (statuses %+v)", st.State, statuses.All())
	}
}
