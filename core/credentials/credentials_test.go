package credentials_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/credentials"
)

func TestCredentialStringRoundTrip(t *testing.T) {
	salt := []byte("salty")
	c, err := credentials.FromSaltedPassword(credentials.SHA512, salt, credentials.SaltPassword(credentials.SHA512, "pw", salt, 4096), 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := c.String()
	if !strings.HasPrefix(s, "salt=c2FsdHk=,stored_key=") || !strings.HasSuffix(s, ",iterations=4096") {
		t.Errorf("string %q, want Kafka's salt=...,stored_key=...,server_key=...,iterations=N", s)
	}
	back, err := credentials.ParseCredential("here", s)
	if err != nil || !bytes.Equal(back.StoredKey, c.StoredKey) || !bytes.Equal(back.ServerKey, c.ServerKey) || back.Iterations != 4096 {
		t.Errorf("parse: %+v %v", back, err)
	}
	for _, bad := range []string{"", "salt=x", "salt=c2FsdHk=,stored_key=AA==,server_key=AA==,iterations=0",
		"salt=c2FsdHk=,stored_key=AA==,server_key=AA==,iterations=1,extra=1", "salt=!!,stored_key=AA==,server_key=AA==,iterations=1"} {
		if _, err := credentials.ParseCredential("/config/users/x SCRAM-SHA-256", bad); !errors.Is(err, credentials.ErrMalformed) ||
			!strings.Contains(err.Error(), "/config/users/x") {
			t.Errorf("parse %q: %v, want ErrMalformed naming the path", bad, err)
		}
	}
	if _, err := credentials.FromSaltedPassword(credentials.SHA256, salt, []byte("x"), 100); !errors.Is(err, credentials.ErrUnacceptable) {
		t.Errorf("100 iterations: %v", err)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"alice": "alice", "a b": "a%20b", "a/b*c~": "a%2Fb%2Ac~", "é": "%C3%A9"} {
		if got := credentials.Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
		if back, _ := credentials.Desanitize(want); back != in {
			t.Errorf("Desanitize(%q) = %q", want, back)
		}
	}
}

func waitVersion(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Alter writes Kafka's layout; a second store (another broker) sees it
// through its watch; deletes, duplicates and garbage are reported.
func TestStoreAlterWatchAndGarbage(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Connect(), srv.Connect()
	sa, sb := credentials.Open(a, nil), credentials.Open(b, nil)
	defer sa.Close()
	defer sb.Close()
	ctx := context.Background()
	salt := []byte("s")
	sp := credentials.SaltPassword(credentials.SHA256, "pw", salt, 4096)
	users, errs := sa.Alter(ctx, nil, []credentials.Upsert{
		{User: "bob/x", Mechanism: credentials.SHA256, Iterations: 4096, Salt: salt, SaltedPassword: sp},
		{User: "dup", Mechanism: credentials.SHA256, Iterations: 4096, Salt: salt, SaltedPassword: sp},
		{User: "dup", Mechanism: credentials.SHA256, Iterations: 4096, Salt: salt, SaltedPassword: sp},
		{User: "few", Mechanism: credentials.SHA256, Iterations: 10, Salt: salt, SaltedPassword: sp},
	})
	want := []error{nil, credentials.ErrDuplicate, credentials.ErrUnacceptable}
	for i, u := range users {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil && errs[i] != nil) {
			t.Errorf("alter %s: %v, want %v", u, errs[i], want[i])
		}
	}
	data, _, err := a.Get(ctx, "/config/users/bob%2Fx")
	if err != nil || !bytes.HasPrefix(data, []byte(`{"version":1,"config":{"SCRAM-SHA-256":"salt=cw==,stored_key=`)) {
		t.Fatalf("node: %s %v", data, err)
	}
	waitVersion(t, func() bool { _, ok := sb.Lookup(credentials.SHA256, "bob/x"); return ok })
	if d := sb.Describe(nil); len(d) != 1 || d[0].User != "bob/x" || d[0].Infos[0].Iterations != 4096 {
		t.Errorf("describe all: %+v", d)
	}
	if d := sb.Describe([]string{"nobody"}); !errors.Is(d[0].Err, credentials.ErrNotFound) {
		t.Errorf("describe nobody: %+v", d)
	}
	_, errs = sa.Alter(ctx, []credentials.Deletion{{User: "bob/x", Mechanism: credentials.SHA512}}, nil)
	if !errors.Is(errs[0], credentials.ErrNotFound) {
		t.Errorf("delete a missing mechanism: %v", errs[0])
	}
	if _, errs = sa.Alter(ctx, []credentials.Deletion{{User: "bob/x", Mechanism: credentials.SHA256}}, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitVersion(t, func() bool { _, ok := sb.Lookup(credentials.SHA256, "bob/x"); return !ok })

	if err := a.Create(ctx, "/config/users/mallory", []byte(`{"version":1,"config":{"SCRAM-SHA-256":"salt=zz"}}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, func() bool { return sb.Users()["mallory"].Err != nil })
	if err := sb.Users()["mallory"].Err; !errors.Is(err, credentials.ErrMalformed) || !strings.Contains(err.Error(), "/config/users/mallory") {
		t.Errorf("garbage: %v, want ErrMalformed naming the path", err)
	}
}
