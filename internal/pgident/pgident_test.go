package pgident

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, quoted string
		ok         bool
	}{
		{"acemq_outbox", `"acemq_outbox"`, true},
		{"app.outbox", `"app"."outbox"`, true},
		{"_x9", `"_x9"`, true},
		{"", "", false},
		{"Outbox", "", false},
		{"9lives", "", false},
		{"a.b.c", "", false},
		{".t", "", false},
		{"s.", "", false},
		{`t"; DROP TABLE x; --`, "", false},
		{"t-1", "", false},
		{"t\x00", "", false},
		{"abcdefghijabcdefghijabcdefghijabcdefghij1", "", false}, // 41 > 40
		{"abcdefghijabcdefghijabcdefghijabcdefghij", `"abcdefghijabcdefghijabcdefghijabcdefghij"`, true},
		{"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd.t", "", false}, // schema 64
	} {
		n, err := Parse(tc.in, 40)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) error = %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && n.Quoted() != tc.quoted {
			t.Errorf("Parse(%q).Quoted() = %s, want %s", tc.in, n.Quoted(), tc.quoted)
		}
		if tc.ok && n.String() != tc.in {
			t.Errorf("Parse(%q).String() = %s", tc.in, n.String())
		}
	}
}

func TestDerived(t *testing.T) {
	t.Parallel()
	n, err := Parse("app.outbox", 40)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Sibling("_notify"); got != `"app"."outbox_notify"` {
		t.Errorf("Sibling = %s", got)
	}
	if got := n.Local("_idx"); got != `"outbox_idx"` {
		t.Errorf("Local = %s", got)
	}
}
