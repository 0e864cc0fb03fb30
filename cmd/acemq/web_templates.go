package main

import (
	"html/template"
	"net/url"
	"strconv"
	"time"

	"github.com/acemq/acemq/internal/escape"
)

// webTemplates are the dashboard's pages. html/template escapes what they
// print for HTML; what comes from a message has been through
// escape.String before, so that control characters and bidi overrides
// show as escapes rather than act.
var webTemplates = template.Must(template.New("web").Funcs(template.FuncMap{
	"count": count,
	"rate":  rate,
	"q":     url.QueryEscape,
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
	"dlqLike": func(name string) bool { _, ok := queueOf(name); return ok },
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
</style></head><body>
<h1><a href="/">acemq</a> · vhost <code>{{.Vhost}}</code> · {{.Title}}</h1>
{{if .AllowActions}}<p>Actions allowed, as <b>{{.Operator}}</b>.</p>{{else}}<p class="ro">Read-only: started without --allow-actions.</p>{{end}}
{{if .Error}}<div class="err" id="error">{{.Error}}</div>{{end}}
{{end}}

{{define "foot"}}</body></html>{{end}}

{{define "status"}}{{template "head" .}}{{with .Data}}
<p id="source">From the {{.Source}}{{if not .ManagementError}} at {{.Management}}{{end}}: <span id="services">{{len .Services}}</span> {{if eq (len .Services) 1}}service{{else}}services{{end}}{{if .Other}}, {{len .Other}} other queues not acemq's{{end}}.</p>
{{if .ManagementError}}<p class="err">{{.ManagementError}}</p>{{end}}
{{if or .Services .Delays}}
<table id="status"><tr><th>queue</th><th>role</th><th>messages</th><th>ready</th><th>unacked</th><th>consumers</th><th>in/s</th><th>out/s</th><th>state</th><th></th></tr>
{{range .Services}}{{range $i, $q := .Queues}}
<tr{{if eq $i 0}} class="svc"{{end}} data-queue="{{esc $q.Name}}">
<td>{{esc $q.Name}}</td><td>{{$q.Role}}</td>
{{if $q.Missing}}<td colspan="7" class="missing">missing</td><td></td>{{else}}
<td class="n messages">{{count $q.Messages}}</td><td class="n ready">{{count $q.Ready}}</td><td class="n">{{count $q.Unacked}}</td><td class="n">{{count $q.Consumers}}</td>
<td class="n">{{rate $q.PublishRate}}</td><td class="n">{{rate $q.DeliverRate}}</td><td>{{$q.State}}</td>
<td>{{if dlqLike $q.Name}}<a href="/triage?queue={{q $q.Name}}">triage</a>{{end}}</td>{{end}}
</tr>{{end}}{{end}}
{{range .Delays}}<tr data-queue="{{esc .Name}}"><td>{{esc .Name}}</td><td>{{.Role}}</td>{{if .Missing}}<td colspan="7" class="missing">missing</td><td></td>{{else}}
<td class="n messages">{{count .Messages}}</td><td class="n ready">{{count .Ready}}</td><td class="n">{{count .Unacked}}</td><td class="n">{{count .Consumers}}</td>
<td class="n">{{rate .PublishRate}}</td><td class="n">{{rate .DeliverRate}}</td><td>{{.State}}</td><td></td>{{end}}</tr>{{end}}
</table>{{end}}
{{if .Other}}<p>Not acemq's: {{range $i, $n := .Other}}{{if $i}}, {{end}}<code>{{esc $n}}</code>{{end}}</p>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "triage"}}{{template "head" .}}{{$p := .}}{{with .Data}}
<p id="summary"><b>{{esc .Queue}}</b>: <span id="depth">{{.Depth}}</span> ready, read <span id="read">{{.Read}}</span> in <span id="groups">{{len .Groups}}</span> groups (none consumed).</p>
{{$queue := .Queue}}
{{range .Groups}}
<div class="group" id="{{.ID}}" data-count="{{.Count}}">
<p><code>{{.ID}}</code> · <b class="count">{{.Count}}</b> {{if eq .Count 1}}message{{else}}messages{{end}} · {{.Kind}} · attempts {{attempts .}}</p>
<table>
<tr><th>reason</th><td><code>{{esc .Key}}</code></td></tr>
{{if .FirstCreated}}<tr><th>created</th><td>{{when .FirstCreated}} .. {{when .LastCreated}}</td></tr>{{end}}
{{if .FirstDeadLettered}}<tr><th>dead-lettered by the broker</th><td>{{when .FirstDeadLettered}} .. {{when .LastDeadLettered}}</td></tr>{{end}}
<tr><th>sample</th><td>{{if .SampleID}}<a class="sample" href="/message?queue={{q $queue}}&amp;id={{q .SampleID}}">{{esc .SampleID}}</a>{{else}}-{{end}} <code>{{.SampleBody}}</code></td></tr>
</table>
{{if $p.AllowActions}}
<form method="post" action="/replay"><input type="hidden" name="token" value="{{$p.Token}}"><input type="hidden" name="queue" value="{{$queue}}"><input type="hidden" name="group" value="{{.ID}}">
<button type="submit" class="replay">replay {{.Count}} to their queue</button></form>
&nbsp;
<form method="post" action="/discard"><input type="hidden" name="token" value="{{$p.Token}}"><input type="hidden" name="queue" value="{{$queue}}"><input type="hidden" name="group" value="{{.ID}}">
archive queue <input type="text" name="to_queue" value="{{$queue}}.archive" required> why <input type="text" name="why" required placeholder="written on each message">
<button type="submit" class="discard">discard {{.Count}}</button></form>
{{end}}
</div>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "message"}}{{template "head" .}}{{with .Data}}
<p><a href="/triage?queue={{q .Queue}}">back to the triage of {{esc .Queue}}</a></p>
{{if .Found}}
<h2>envelope</h2>
<table id="envelope">{{range .Fields}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
<h2>headers</h2>
<table id="headers">{{range .Headers}}<tr><th><code>{{index . 0}}</code></th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
<h2>body ({{.Bytes}} bytes{{if .Cut}}, cut{{end}})</h2>
<pre id="body">{{.Body}}</pre>
{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "action"}}{{template "head" .}}{{with .Data}}
{{if .Action}}<p class="ok" id="result">{{esc .Queue}}: group <code>{{.Group}}</code>, {{.Matched}} messages: <span id="moved">{{.Moved}}</span> {{if eq .Action "discard"}}archived in{{else}}replayed to{{end}} <code>{{.To}}</code>, <span id="left">{{.Left}}</span> left.
{{esc .Queue}}: <span id="before">{{.Before}}</span> before, <span id="after">{{.After}}</span> after.</p>{{end}}
<p><a href="/triage?queue={{q .Queue}}">back to the triage of {{esc .Queue}}</a> · <a href="/">status</a></p>
{{end}}{{template "foot" .}}{{end}}
`
