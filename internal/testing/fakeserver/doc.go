// Fakeserver is a scriptable MCP stdio server that mcpgate's tests run as a backend.
//
// It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout, negotiates MCP
// 2025-11-25 (echoing 2025-06-18 or 2025-03-26 when a client asks for them),
// handles every request on its own goroutine so replies come back out of
// order, and drains stdin until EOF. At EOF it finishes the requests in
// progress (slow keeps sleeping; wait_cancel and server→client requests give
// up unanswered) and exits 0. Diagnostics go to stderr.
//
// # Flags
//
// Every flag can also be set through the environment as MCPGATE_FAKE_<FLAG>,
// upper-cased with dashes turned into underscores (--crash-after is
// MCPGATE_FAKE_CRASH_AFTER); a flag on the command line wins.
//
//	--name NAME                 serverInfo.name (default "fakeserver")
//	--instructions TEXT         instructions in the initialize result
//	--tools a,b,c               extra no-op tools; calling one returns "NAME ok"
//	--page-size N               paginate tools/list, resources/list,
//	                            resources/templates/list and prompts/list with
//	                            nextCursor (0 = one page)
//	--crash-after N             answer N tools/call requests normally; the
//	                            (N+1)th makes the process exit with --crash-code
//	                            before answering (-1 = never)
//	--crash-code CODE           exit code for --crash-after (default 1)
//	--exit-at-start CODE        exit with CODE before reading anything (-1 = no)
//	--stderr-at-start TEXT      write TEXT and a newline to stderr at start
//	                            (before --exit-at-start)
//	--ignore-sigterm            ignore SIGTERM (grandchildren ignore it only when
//	                            spawned with ignore_sigterm)
//	--ignore-eof                keep running after stdin EOF until killed
//	--handshake-delay DURATION  delay the initialize result
//	--initialize-barrier N      answer initialize only once the --record file
//	                            holds N initialize requests (then apply
//	                            --handshake-delay): servers sharing a record
//	                            file finish their handshakes only if their
//	                            client started all of them in parallel
//	--no-initialize-response    never answer initialize (other requests are served)
//	--list-changed-before-init  send notifications/tools/list_changed before the
//	                            initialize result
//	--resources N               resources fake://r/0 … fake://r/N-1 (text/plain,
//	                            text "contents of fake://r/I"), one template
//	                            fake://r/{index}, resources/subscribe and
//	                            resources/unsubscribe; reading fake://ask/SHORT
//	                            (sampling, elicitation or roots) first sends
//	                            that request to the client and has its answer
//	                            as contents
//	--prompts                   prompt "greet" (argument "name", required) and
//	                            completion/complete for that argument; with
//	                            the argument "ask" (sampling, elicitation or
//	                            roots) greet first sends that request to the
//	                            client and greets with its answer
//	--ping MODE                 "answer" (default), "never" (read ping requests
//	                            but never answer them, while answering the
//	                            rest) or "unknown" (answer -32601, as a server
//	                            without ping does)
//	--no-tools-if FILE          list no tools while FILE exists, e.g. to come
//	                            back from a restart without tools
//	--tools-file FILE           a JSON array of tool objects, read at start and
//	                            listed as written after the others; calling one
//	                            returns "NAME ok" (a test changes the file
//	                            between starts to change the catalog)
//	--record FILE               append every line read from stdin to FILE,
//	                            byte for byte including its newline
//	--sleeper, --sleeper-double-fork, --sleeper-max DURATION
//	                            internal: the grandchild mode of spawn_grandchild
//	                            (a sleeper exits by itself after --sleeper-max,
//	                            default 10m, as a safety net)
//
// The logging capability is always advertised: logging/setLevel is recorded.
// Capabilities: tools{listChanged}, logging, plus resources{subscribe,listChanged}
// with --resources and prompts{listChanged}, completions with --prompts.
//
// # Tools
//
// Tools answer with text content; most also return structuredContent. Raw JSON
// values (ids, _meta) are included exactly as received; rawId and rawMeta hold
// the received bytes as strings for byte-exact checks.
//
//	echo {text}                text content TEXT; structuredContent
//	                           {text, id, rawId, meta, rawMeta, arguments}
//	slow {ms, text}            sleep ms milliseconds, then answer "slept MS ms"
//	                           (ignores cancellation, so a late reply is sent)
//	crash {code}               exit with code (default 1) at once, unanswered
//	hang {}                    stop reading stdin and never write to stdout again
//	garbage {bytes}            write a non-JSON line, a line of exactly bytes
//	                           bytes (default 16 MiB + 1 KiB; a valid JSON
//	                           notification "fakeserver/padding" when bytes
//	                           allows), a response with unknown id 999999999,
//	                           then answer "garbage sent"
//	huge {bytes}               answer with a text of bytes "x" characters
//	stderr {text, repeat}      write TEXT and a newline to stderr repeat times
//	                           (default 1) in one write, then answer; TEXT may
//	                           hold newlines and any prefix ("<3>", "ERROR: ").
//	                           structuredContent {bytes}
//	stderr_spam {lines, prefix}  write lines (default 1000) lines "PREFIX I" to
//	                           stderr as fast as possible (prefix "spam"), then
//	                           answer; lines -1 writes until notifications/cancelled
//	                           names the request (or stdin ends) and never answers
//	set_tools {names, burst}   replace the extra tools with names, then send
//	                           burst (default 1) notifications/tools/list_changed
//	                           and answer
//	progress {steps, ms, crash} send steps notifications/progress {progressToken,
//	                           progress I, total steps, message} using the
//	                           request's _meta.progressToken (none without one),
//	                           ms apart, then answer; with crash true, exit 1
//	                           instead of answering
//	sample {params, id}        send sampling/createMessage to the client; the
//	elicit {params, id}        answer's structuredContent is {result} or {error}
//	roots {params, id}         as the client sent them, isError when an error;
//	request {method, params, id}  elicitation/create, roots/list, or any method.
//	                           params replaces the default params; id replaces
//	                           the default id "fakeserver-N" (any JSON value).
//	                           request with detach true answers the call first
//	                           and sends the request after, with no call in
//	                           flight
//	requests {requests}        send every {method, params} of requests to the
//	                           client in one write, so that all are in flight
//	                           at once; structuredContent {answers}: per
//	                           request, in order, {result} or {error}; with
//	                           wait_cancel true, once answered it waits for
//	                           notifications/cancelled and never answers
//	notify {method, params}    send any notification to the client
//	log {level, logger, data}  send notifications/message (level default "info")
//	loglevel {}                structuredContent {level}: the last logging/setLevel
//	wait_cancel {}             block until notifications/cancelled names this
//	                           request; never answers
//	cancelled {}               structuredContent {cancelled: [{requestId, reason}]}
//	                           for every notifications/cancelled received
//	error {code, message, data}  answer with that JSON-RPC error
//	                           (default -32000 "fake error")
//	touch {uri}                send notifications/resources/updated {uri};
//	                           structuredContent {uri, subscribed}
//	spawn_grandchild {double_fork, ignore_sigterm}
//	                           start a sleeper grandchild (this binary with
//	                           --sleeper) in the same process group, sharing
//	                           stderr; with double_fork its parent exits so it is
//	                           reparented. structuredContent {pid, pgid}
//	pid {}                     structuredContent {pid, pgid, ppid, count}: count is how often
//	                           pid was called in this process
//
// Unknown tools get JSON-RPC error -32602, unknown methods -32601.
package main
