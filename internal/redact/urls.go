package redact

import "regexp"

// userinfo finds what reads as a URL's user and password in free text:
// a scheme, "//", a user, ":", a password up to the "@" before the host.
var userinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://[^\s/@:]*:)([^\s/@]+)@`)

// URLsIn returns s with the password of every URL it holds replaced by
// Marker: for text whose URLs are not known beforehand, such as an error
// a user's handler returned ("dial postgres://svc:hunter2@db: refused"),
// before it leaves the process in a place others read.
func URLsIn(s string) string {
	return userinfo.ReplaceAllString(s, "${1}"+Marker+"@")
}
