package journaldtest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestNativeSocketAndStream(t *testing.T) {
	j := Start(t)

	c, err := net.Dial("unixgram", j.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("MESSAGE=hello native\nSYSLOG_IDENTIFIER=journaldtest\nPRIORITY=5\n")); err != nil {
		t.Fatal(err)
	}
	got := j.AwaitMatch(t, 1, Entry{"SYSLOG_IDENTIFIER": "journaldtest"})
	if got[0]["MESSAGE"] != "hello native" || got[0]["PRIORITY"] != "5" {
		t.Errorf("entry = %v", got[0])
	}

	// A child whose stderr is a journal stream, as under systemd.
	f, stream := j.Stream(t, "journaldtest-child")
	cmd := exec.Command("/bin/sh", "-c", `echo "stream=$JOURNAL_STREAM" >&2`)
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), "JOURNAL_STREAM="+stream)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got = j.AwaitMatch(t, 1, Entry{"SYSLOG_IDENTIFIER": "journaldtest-child"})
	if got[0]["MESSAGE"] != "stream="+stream || got[0]["_TRANSPORT"] != "stdout" {
		t.Errorf("entry = %v", got[0])
	}
	if !strings.Contains(j.Dir(), "log/journal") {
		t.Errorf("Dir() = %s", j.Dir())
	}
}

func TestDecodeValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`[104,105,10,0]`, "hi\n\x00"},
		{`["first","second"]`, "first"},
		{`[[1,2],"x"]`, "\x01\x02"},
	} {
		got, err := decodeValue([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("decodeValue(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
