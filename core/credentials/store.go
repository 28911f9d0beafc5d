package credentials

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
)

// User is one user's credentials as the store holds them.
type User struct {
	Name  string
	Creds map[Mechanism]Credential
	// Err: the user's node does not decode (wraps ErrMalformed, names the
	// path); Creds is then empty.
	Err error
}

// Users is a decoded copy of /config/users: a value, never modified once
// built.
type Users map[string]User

// Lookup returns user's credential for m.
func (u Users) Lookup(m Mechanism, user string) (Credential, bool) {
	c, ok := u[user].Creds[m]
	return c, ok
}

// DecodeUser decodes a user's node (path is for errors).
func DecodeUser(name, path string, data []byte) User {
	u := User{Name: name, Creds: map[Mechanism]Credential{}}
	cfg, err := layout.DecodeTopicConfig(path, data)
	if err != nil {
		u.Err = fmt.Errorf("%w: %w", ErrMalformed, err)
		return u
	}
	for k, v := range cfg {
		m, err := ParseMechanism(k)
		if err != nil {
			continue // other user configs (quotas) are not ours
		}
		c, err := ParseCredential(path+" "+k, v)
		if err != nil {
			u.Err, u.Creds = err, map[Mechanism]Credential{}
			return u
		}
		u.Creds[m] = c
	}
	return u
}

// encodeUser is the node of user u's credentials, keeping the other
// configs (others) the node held.
func encodeUser(creds map[Mechanism]Credential, others map[string]string) []byte {
	cfg := map[string]string{}
	for k, v := range others {
		if _, err := ParseMechanism(k); err != nil {
			cfg[k] = v
		}
	}
	for m, c := range creds {
		cfg[m.String()] = c.String()
	}
	return layout.EncodeTopicConfig(cfg)
}

// Store is a broker's view of the SCRAM credentials: a watched, decoded
// copy of /config/users, plus the writes of AlterUserScramCredentials.
// Safe for concurrent use.
type Store struct {
	s      coord.Store
	log    *slog.Logger
	users  atomic.Pointer[Users]
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// loaded is closed after the first load (succeeded or not).
	loaded   chan struct{}
	loadOnce sync.Once
	// version counts loads, for tests waiting for a change.
	version atomic.Int64
}

// Open starts watching s's /config/users; Close stops. It does not wait for
// the first load: WaitLoaded does.
func Open(s coord.Store, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &Store{s: s, log: log, ctx: ctx, cancel: cancel, done: make(chan struct{}), loaded: make(chan struct{})}
	empty := Users{}
	st.users.Store(&empty)
	go st.watch()
	return st
}

// Close stops watching.
func (st *Store) Close() error {
	st.cancel()
	<-st.done
	return nil
}

// WaitLoaded waits until the first load of /config/users is done.
func (st *Store) WaitLoaded(ctx context.Context) error {
	select {
	case <-st.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Users returns the current decoded copy (do not modify).
func (st *Store) Users() Users { return *st.users.Load() }

// Lookup returns user's credential for m from the current copy.
func (st *Store) Lookup(m Mechanism, user string) (Credential, bool) {
	return st.Users().Lookup(m, user)
}

// watch reloads the whole of /config/users whenever it or any user node
// changes, until Close. Errors of the store (a lost session) are retried
// with a backoff; the last good copy is served meanwhile.
func (st *Store) watch() {
	defer close(st.done)
	backoff := time.Duration(0)
	for {
		gen, cancel := context.WithCancel(st.ctx)
		changed, err := st.load(gen)
		st.loadOnce.Do(func() { close(st.loaded) })
		if err != nil {
			cancel()
			if st.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			st.log.Warn("credentials: reading SCRAM credentials failed, retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-st.ctx.Done():
				return
			}
		}
		backoff = 0
		select {
		case <-changed:
		case <-st.ctx.Done():
		}
		cancel() // the previous generation's watch forwarders
		if st.ctx.Err() != nil {
			return
		}
	}
}

// load reads every user node with watches; changed is signalled when any
// of them fires.
func (st *Store) load(ctx context.Context) (<-chan struct{}, error) {
	changed := make(chan struct{}, 1)
	forward := func(w <-chan coord.Event) {
		go func() {
			select {
			case <-w:
				select {
				case changed <- struct{}{}:
				default:
				}
			case <-ctx.Done():
			}
		}()
	}
	if err := coord.EnsurePath(ctx, st.s, UsersPath); err != nil {
		return nil, fmt.Errorf("credentials: %s: %w", UsersPath, err)
	}
	names, _, w, err := st.s.ChildrenW(ctx, UsersPath)
	if err != nil {
		return nil, fmt.Errorf("credentials: list %s: %w", UsersPath, err)
	}
	forward(w)
	users := Users{}
	for _, child := range names {
		path := UsersPath + "/" + child
		data, _, w, err := st.s.GetW(ctx, path)
		if errors.Is(err, coord.ErrNoNode) {
			continue // deleted since: the children watch fired
		}
		if err != nil {
			return nil, fmt.Errorf("credentials: read %s: %w", path, err)
		}
		forward(w)
		name, err := Desanitize(child)
		if err != nil {
			users[child] = User{Name: child, Err: fmt.Errorf("%w: %s: user name: %v", ErrMalformed, path, err)}
			st.log.Error("credentials: bad user node", "path", path, "err", err)
			continue
		}
		u := DecodeUser(name, path, data)
		if u.Err != nil {
			st.log.Error("credentials: bad user node", "path", path, "err", u.Err)
		}
		users[name] = u
	}
	st.users.Store(&users)
	st.version.Add(1)
	return changed, nil
}

// Upsert is one credential to set.
type Upsert struct {
	User           string
	Mechanism      Mechanism
	Iterations     int
	Salt           []byte
	SaltedPassword []byte
}

// Deletion is one credential to delete.
type Deletion struct {
	User      string
	Mechanism Mechanism
}

// Alter applies deletions and upserts, each user's changes in one
// compare-and-set of their node (retried on a concurrent change). errs has
// one entry per user named, in the order first named; nil for a user
// whose changes were applied. A user named twice (in both lists, or twice
// with the same mechanism) gets ErrDuplicate and none of its changes, as
// Kafka answers DUPLICATE_RESOURCE.
func (st *Store) Alter(ctx context.Context, deletions []Deletion, upserts []Upsert) (users []string, errs []error) {
	type change struct {
		dels []Mechanism
		ups  map[Mechanism]Credential
		err  error
	}
	byUser := map[string]*change{}
	get := func(u string) *change {
		c := byUser[u]
		if c == nil {
			c = &change{ups: map[Mechanism]Credential{}}
			byUser[u] = c
			users = append(users, u)
		}
		return c
	}
	seen := map[Deletion]bool{}
	dup := func(u string, m Mechanism) bool {
		k := Deletion{u, m}
		d := seen[k]
		seen[k] = true
		return d
	}
	for _, d := range deletions {
		c := get(d.User)
		switch {
		case c.err != nil:
		case d.User == "":
			c.err = fmt.Errorf("%w: empty user name", ErrUnacceptable)
		case !d.Mechanism.Valid():
			c.err = fmt.Errorf("%w: %d", ErrUnknownMechanism, d.Mechanism)
		case dup(d.User, d.Mechanism):
			c.err = fmt.Errorf("%w: %s", ErrDuplicate, d.User)
		default:
			c.dels = append(c.dels, d.Mechanism)
		}
	}
	for _, u := range upserts {
		c := get(u.User)
		if c.err != nil {
			continue
		}
		if u.User == "" {
			c.err = fmt.Errorf("%w: empty user name", ErrUnacceptable)
			continue
		}
		if dup(u.User, u.Mechanism) && u.Mechanism.Valid() {
			c.err = fmt.Errorf("%w: %s", ErrDuplicate, u.User)
			continue
		}
		cred, err := FromSaltedPassword(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			c.err = err
			continue
		}
		c.ups[u.Mechanism] = cred
	}
	errs = make([]error, len(users))
	for i, u := range users {
		c := byUser[u]
		if c.err == nil {
			c.err = st.alterUser(ctx, u, c.dels, c.ups)
		}
		errs[i] = c.err
	}
	return users, errs
}

// alterUser applies one user's changes by compare-and-set.
func (st *Store) alterUser(ctx context.Context, user string, dels []Mechanism, ups map[Mechanism]Credential) error {
	path := UserPath(user)
	if err := coord.EnsurePath(ctx, st.s, UsersPath); err != nil {
		return fmt.Errorf("credentials: %s: %w", UsersPath, err)
	}
	for {
		data, stat, err := st.s.Get(ctx, path)
		exists := err == nil
		if err != nil && !errors.Is(err, coord.ErrNoNode) {
			return fmt.Errorf("credentials: read %s: %w", path, err)
		}
		others := map[string]string{}
		creds := map[Mechanism]Credential{}
		if exists {
			cfg, err := layout.DecodeTopicConfig(path, data)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			others = cfg
			u := DecodeUser(user, path, data)
			if u.Err != nil {
				return u.Err
			}
			creds = u.Creds
		}
		for _, m := range dels {
			if _, ok := creds[m]; !ok {
				return fmt.Errorf("%w: %s of user %q", ErrNotFound, m, user)
			}
			delete(creds, m)
		}
		for m, c := range ups {
			creds[m] = c
		}
		out := encodeUser(creds, others)
		switch {
		case !exists:
			err = st.s.Create(ctx, path, out, coord.Persistent)
		default:
			_, err = st.s.Set(ctx, path, out, stat.Version)
		}
		if errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrBadVersion) {
			continue // changed meanwhile: read again
		}
		if err != nil {
			return fmt.Errorf("credentials: write %s: %w", path, err)
		}
		return nil
	}
}

// Described is one user's credentials as DescribeUserScramCredentials
// reports them (no keys: mechanism and iterations only).
type Described struct {
	User  string
	Infos []Info
	Err   error // ErrNotFound for an unknown user named; ErrMalformed
}

// Info is one credential's description.
type Info struct {
	Mechanism  Mechanism
	Iterations int
}

// Describe describes the users named (all users with a credential when
// names is empty), sorted by name when listing all.
func (st *Store) Describe(names []string) []Described {
	us := st.Users()
	all := len(names) == 0
	if all {
		for n, u := range us {
			if len(u.Creds) > 0 || u.Err != nil {
				names = append(names, n)
			}
		}
		slices.Sort(names)
	}
	out := make([]Described, 0, len(names))
	for _, n := range names {
		u, ok := us[n]
		d := Described{User: n}
		switch {
		case u.Err != nil:
			d.Err = u.Err
		case !ok || len(u.Creds) == 0:
			d.Err = fmt.Errorf("%w: user %q has no SCRAM credential", ErrNotFound, n)
		}
		for _, m := range Mechanisms {
			if c, ok := u.Creds[m]; ok {
				d.Infos = append(d.Infos, Info{Mechanism: m, Iterations: c.Iterations})
			}
		}
		out = append(out, d)
	}
	return out
}
