package main

import (
	"html/template"
	"strconv"
	"time"

	"github.com/acemq/acemq/internal/escape"
)

// webTemplates are the dashboard's pages. html/template escapes what they
// print for HTML; what comes from a message has been through
// escape.String before, so that control characters and bidi overrides
// show as escapes rather than act. A link's query is written with the raw
// value ({{.SampleID}} in href="/message?...&id=...") and html/template
// percent-encodes it, once: the page it leads to receives the bytes the
// message holds. Links to a page that reads a queue carry the key (k=);
// forms carry the token.
var webTemplates = template.Must(template.New("web").Funcs(template.FuncMap{
	"count": count,
	"after": countAfter,
	"rate":  rate,
	"esc":   escape.String,
	"when": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(stamp)
	},
	"attempts": func(g triageGroup) string {
		if g.MinAttempt == g.MaxAttempt {
			return strconv.Itoa(g.MinAttempt)
		}
		return strconv.Itoa(g.MinAttempt) + "-" + strconv.Itoa(g.MaxAttempt)
	},
}).Parse(webHTML))

const webHTML = `
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>acemq: {{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em} h1 a{color:inherit;text-decoration:none}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border-bottom:1px solid #ddd;padding:.3em .7em;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.svc td{border-top:2px solid #999;font-weight:600}
.missing{color:#a00} .err{background:#fee;border:1px solid #c66;padding:.5em;margin:.5em 0}
.ro{color:#666} code,pre{font-family:ui-monospace,monospace} pre{background:#f7f7f7;padding:.7em;white-space:pre-wrap;word-break:break-all}
form{display:inline;margin:0} input[type=text]{width:14em} button{cursor:pointer}
.group{border:1px solid #ccc;border-radius:4px;padding:.6em 1em;margin:.8em 0}
.ok{background:#efe;border:1px solid #6a6;padding:.5em}
.warn{background:#ffd;border:1px solid #cc6;padding:.3em .8em;margin:.5em 0}
tr.breaker td{background:#fff4f0} tr.partition.idle td{background:#fff8e6} td.links{white-space:nowrap} .badge{display:inline-block;padding:0 .5em;border-radius:3px;font-weight:600;color:#fff;background:#777}
.badge.open{background:#c0392b} .badge.half-open{background:#d68910}
</style></head><body>
<h1><a href="/">acemq</a> · vhost <code>{{.Vhost}}</code> · {{.Title}}</h1>
{{if .AllowActions}}<p>Actions allowed, as <b>{{.Operator}}</b>.</p>{{else}}<p class="ro">Read-only: started without --allow-actions.</p>{{end}}
{{if .Error}}<div class="err" id="error">{{.Error}}</div>{{end}}
{{end}}

{{define "foot"}}</body></html>{{end}}

{{define "status"}}{{template "head" .}}{{$p := .}}{{with .Data}}
<p id="source">From the {{.Source}}{{if not .ManagementError}} at {{.Management}}{{end}}: <span id="services">{{len .Services}}</span> {{if eq (len .Services) 1}}service{{else}}services{{end}}{{if .Other}}, {{len .Other}} other queues not acemq's{{end}}{{if .NotClosed}}, <span id="not-closed">{{.NotClosed}}</span> not closed{{end}}.</p>
{{if .ManagementError}}<p class="err">{{.ManagementError}}</p>{{end}}
{{if or .Plain .Delays}}
<table id="status"><tr><th>queue</th><th>role</th><th>messages</th><th>ready</th><th>unacked</th><th>dead-lettering</th><th>consumers</th><th>in/s</th><th>out/s</th><th>state</th><th></th></tr>
{{range .Plain}}{{range $i, $q := .Queues}}
<tr{{if eq $i 0}} class="svc"{{end}} data-queue="{{esc $q.Name}}">{{template "row" $q}}
<td>{{if index $.Data.Triage $q.Name}}<a href="/triage?queue={{$q.Name}}&amp;k={{$p.Key}}">triage</a>{{end}}</td>
</tr>{{end}}{{range index $.Data.Breakers .Queue}}
<tr class="breaker" data-breaker="{{.Instance}}" title="marker queue {{.Marker}}"><td colspan="11"><span class="badge {{.Class}}">breaker {{.State}}</span> on <code class="instance">{{.Instance}}</code>{{if .When}} <span class="when">{{.When}}</span>{{end}}{{if .Why}}: <span class="why">{{.Why}}</span>{{end}}{{if .Note}} <span class="ro note">({{.Note}})</span>{{end}}</td></tr>{{end}}{{end}}
{{if .Delays}}{{with .DelayTotal}}<tr class="svc" id="delays" data-queue="{{.Name}}"><td>{{.Name}}</td><td>delay levels</td>
<td class="n messages">{{count .Messages}}</td><td class="n ready">{{count .Ready}}</td><td class="n">{{count .Unacked}}</td><td class="n">{{count .DeadLettering}}</td><td class="n">-</td><td class="n">-</td><td class="n">-</td>
<td id="levels">{{.Levels}}</td><td></td></tr>{{end}}
{{range .DelayRows}}<tr data-queue="{{esc .Name}}">{{template "row" .}}<td></td></tr>{{end}}{{end}}
</table>{{end}}
{{if .Partitioned}}{{$cols := 12}}{{if .Ordered}}{{$cols = 13}}{{end}}
<table id="partitions"><tr><th>partitioned queue</th><th>ready</th><th>unacked</th><th>consumers</th><th>.dlq</th><th>.parked</th><th>retrying</th><th>in/s</th><th>out/s</th><th>node</th>{{if .Ordered}}<th>active consumer</th>{{end}}<th>state</th><th></th></tr>
{{range .Partitioned}}
<tr class="svc set" data-queue="{{.Queue}}"><td>{{.Label}}</td>{{template "pline" .Line}}{{if $.Data.Ordered}}<td class="active"></td>{{end}}<td class="state">{{.Line.State}}</td>
<td class="links">{{if .DLQSet}}<a class="triage-set" href="/triage?queue={{.DLQSet}}&amp;k={{$p.Key}}">triage every .dlq</a>{{end}}{{if .ParkedSet}} <a class="triage-set" href="/triage?queue={{.ParkedSet}}&amp;k={{$p.Key}}">every .parked</a>{{end}}</td></tr>
{{range .Rows}}<tr class="partition{{if .Idle}} idle{{end}}" data-queue="{{.Queue}}"><td>&nbsp;&nbsp;{{.Queue}}</td>{{template "pline" .Line}}{{if $.Data.Ordered}}<td class="active">{{.Line.Active}}</td>{{end}}<td class="state">{{.Line.State}}{{if .Idle}} <span class="missing no-consumer">(no consumer)</span>{{end}}</td>
<td class="links">{{if .DLQ}}<a href="/triage?queue={{.DLQ}}&amp;k={{$p.Key}}">triage .dlq</a>{{end}}{{if .Parked}} <a href="/triage?queue={{.Parked}}&amp;k={{$p.Key}}">triage .parked</a>{{end}}</td></tr>
{{range index $.Data.Breakers .Name}}
<tr class="breaker" data-breaker="{{.Instance}}" title="marker queue {{.Marker}}"><td colspan="{{$cols}}"><span class="badge {{.Class}}">breaker {{.State}}</span> on <code class="instance">{{.Instance}}</code>{{if .When}} <span class="when">{{.When}}</span>{{end}}{{if .Why}}: <span class="why">{{.Why}}</span>{{end}}{{if .Note}} <span class="ro note">({{.Note}})</span>{{end}}</td></tr>{{end}}{{end}}{{end}}
</table>
{{if .Idle}}<p class="warn" id="idle">{{.Idle}}</p>{{end}}{{end}}
{{if .Other}}<p>Not acemq's: {{range $i, $n := .Other}}{{if $i}}, {{end}}<code>{{esc $n}}</code>{{end}}</p>{{end}}
{{if .Breakers}}<p class="warn" id="breakers">A circuit breaker is not closed: the handlers' dependency is failing, so their consumers stopped taking messages, which wait ready in the queue and spend no attempt; nothing to fix in the broker.</p>{{end}}
{{if .Unseen}}<p class="ro">{{.Unseen}}.</p>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "pline"}}<td class="n ready">{{.Ready}}</td><td class="n unacked">{{.Unacked}}</td><td class="n consumers">{{.Consumers}}</td><td class="n dlq">{{.DLQ}}</td><td class="n parked">{{.Parked}}</td><td class="n retrying">{{.Retrying}}</td>
<td class="n">{{.In}}</td><td class="n">{{.Out}}</td><td class="node">{{.Node}}</td>{{end}}

{{define "row"}}<td>{{esc .Name}}</td><td>{{.Role}}</td>
{{if .Missing}}<td colspan="8" class="missing">missing</td>{{else if .NotSampledYet}}<td colspan="4" class="ro unsampled">not sampled yet</td><td class="n">{{count .Consumers}}</td>
<td class="n">{{rate .PublishRate}}</td><td class="n">{{rate .DeliverRate}}</td><td>{{.State}}</td>{{else}}
<td class="n messages">{{count .Messages}}</td><td class="n ready">{{count .Ready}}</td><td class="n">{{count .Unacked}}</td><td class="n">{{count .DeadLettering}}</td><td class="n">{{count .Consumers}}</td>
<td class="n">{{rate .PublishRate}}</td><td class="n">{{rate .DeliverRate}}</td><td>{{.State}}</td>{{end}}{{end}}

{{define "triage"}}{{template "head" .}}{{$p := .}}{{with .Data}}{{if not $p.Error}}
<p id="summary"><b>{{esc .Queue}}</b>: <span id="depth">{{.Depth}}</span> ready, read <span id="read">{{.Read}}</span> in <span id="groups">{{len .Groups}}</span> groups (none consumed).</p>
{{if .Cost}}<p class="ro" id="cost">{{.Cost}}.</p>{{end}}
{{if .Partitions}}<p id="partitions">Read from {{range $i, $s := .Partitions}}{{if $i}}, {{end}}<a href="/triage?queue={{$s.Queue}}&amp;k={{$p.Key}}">{{esc $s.Queue}}</a> ({{$s.Read}} of {{$s.Depth}}){{end}}.</p>
{{if $p.AllowActions}}<p class="ro" id="set-actions">A group is replayed or discarded from its partition's page (the links), or from every partition at once by acemq triage '{{esc .Queue}}' --replay GROUP (or --discard).</p>{{end}}{{end}}{{end}}
{{$queue := .Queue}}{{$set := .Partitions}}
{{range .Groups}}
<div class="group" id="{{.ID}}" data-count="{{.Count}}">
<p><code>{{.ID}}</code> · <b class="count">{{.Count}}</b> {{if eq .Count 1}}message{{else}}messages{{end}} · {{.Kind}} · attempts {{attempts .}}</p>
<table>
<tr><th>reason</th><td><code>{{esc .Key}}</code></td></tr>
{{if .FirstCreated}}<tr><th>created</th><td>{{when .FirstCreated}} .. {{when .LastCreated}}</td></tr>{{end}}
{{if .FirstDeadLettered}}<tr><th>dead-lettered by the broker</th><td>{{when .FirstDeadLettered}} .. {{when .LastDeadLettered}}</td></tr>{{end}}
{{if .Queues}}<tr><th>partitions</th><td class="in">{{range $i, $c := .Queues}}{{if $i}}, {{end}}<a href="/triage?queue={{$c.Queue}}&amp;k={{$p.Key}}">{{esc $c.Queue}}</a> <b>{{$c.Count}}</b>{{end}}</td></tr>{{end}}
<tr><th>sample</th><td>{{if .SampleID}}<a class="sample" href="/message?queue={{if .SampleQueue}}{{.SampleQueue}}{{else}}{{$queue}}{{end}}&amp;id={{.SampleID}}&amp;k={{$p.Key}}">{{esc .SampleID}}</a>{{else}}-{{end}} <code>{{.SampleBody}}</code></td></tr>
</table>
{{if and $p.AllowActions (not $set)}}
<form method="post" action="/replay"><input type="hidden" name="token" value="{{$p.Token}}"><input type="hidden" name="queue" value="{{$queue}}"><input type="hidden" name="group" value="{{.ID}}">
<button type="submit" class="replay">replay {{.Count}} to their queue</button></form>
&nbsp;
<form method="post" action="/discard"><input type="hidden" name="token" value="{{$p.Token}}"><input type="hidden" name="queue" value="{{$queue}}"><input type="hidden" name="group" value="{{.ID}}">
archive queue <input type="text" name="to_queue" value="{{$queue}}.archive" required> why <input type="text" name="why" required placeholder="written on each message">
<button type="submit" class="discard">discard {{.Count}}</button></form>
{{end}}
</div>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "message"}}{{template "head" .}}{{$p := .}}{{with .Data}}
<p><a href="/triage?queue={{.Queue}}&amp;k={{$p.Key}}">back to the triage of {{esc .Queue}}</a></p>
{{if .Cost}}<p class="ro" id="cost">{{.Cost}}.</p>{{end}}
{{if .Found}}
<h2>envelope</h2>
<table id="envelope">{{range .Fields}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
<h2>headers</h2>
<table id="headers">{{range .Headers}}<tr><th><code>{{index . 0}}</code></th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
{{with .Slip}}<h2 id="slip-title">routing {{.Title}}</h2>
{{if .Error}}<p class="err" id="slip-error">It cannot be read: {{.Error}}</p>{{else}}
<table id="slip">{{range .Rows}}<tr><th>{{.Label}}</th><td>{{range $i, $l := .Lines}}{{if $i}}<br>{{end}}<code>{{$l}}</code>{{end}}</td></tr>{{end}}</table>{{end}}{{end}}
<h2>body ({{.Bytes}} bytes{{if .Cut}}, cut{{end}})</h2>
<pre id="body">{{.Body}}</pre>
{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "action"}}{{template "head" .}}{{$p := .}}{{with .Data}}
{{if .Action}}<p class="ok" id="result">{{esc .Queue}}: group <code>{{.Group}}</code>, {{.Matched}} messages: <span id="moved">{{.Moved}}</span> {{if eq .Action "discard"}}archived in{{else}}replayed to{{end}} <code>{{.To}}</code>, <span id="left">{{.Left}}</span> left.
{{esc .Queue}}: <span id="before">{{.Before}}</span> before, <span id="after">{{after .After}}</span> after.</p>{{end}}
<p><a href="/triage?queue={{.Queue}}&amp;k={{$p.Key}}">back to the triage of {{esc .Queue}}</a> · <a href="/">status</a></p>
{{end}}{{template "foot" .}}{{end}}

{{define "confirm"}}{{template "head" .}}{{$p := .}}{{with .Data}}
<div class="warn" id="cost"><p><b>{{.Reason}}.</b></p><p>{{.Cost}}.</p></div>
<form method="post" id="confirm" action="{{.Path}}?queue={{.Queue}}{{if .ID}}&amp;id={{.ID}}{{end}}"><input type="hidden" name="token" value="{{$p.Token}}"><input type="hidden" name="confirm" value="yes">
<button type="submit" class="confirm">read {{esc .Queue}} anyway</button></form>
<p><a href="/">back to the status</a></p>
{{end}}{{template "foot" .}}{{end}}
`
