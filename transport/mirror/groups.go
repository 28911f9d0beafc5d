package mirror

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadSyncs reads the whole offset-syncs topic of the target (up to its
// end when called) into a SyncStore. cl is a client of the target.
func ReadSyncs(ctx context.Context, cl *kgo.Client, topic string) (*SyncStore, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: end of %s: %w", ErrTarget, topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: start of %s: %w", ErrTarget, topic, err)
	}
	st := &SyncStore{}
	end, _ := ends.Lookup(topic, 0)
	start, _ := starts.Lookup(topic, 0)
	if end.Offset <= start.Offset {
		return st, nil
	}
	opts := append(slices.Clone(cl.Opts()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().At(start.Offset)},
	}))
	rd, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: client for %s: %w", ErrTarget, topic, err)
	}
	defer rd.Close()
	for next := start.Offset; next < end.Offset; {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: read %s: at %d of %d: %w", ErrTarget, topic, next, end.Offset, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("%w: read %s: %w", ErrTarget, topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if s, err := parseSync(r.Key, r.Value); err == nil {
				st.Add(s)
			}
		})
	}
	return st, nil
}

// GroupTranslation is a source group's committed offsets translated to the
// target: per target topic and partition, the source offset and the
// target offset a consumer may start at.
type GroupTranslation struct {
	Group   string
	Offsets []TranslatedOffset
}

// TranslatedOffset is one partition of a GroupTranslation. OK is false when
// no sync covers Source; Target is then -1.
type TranslatedOffset struct {
	Topic       string // source topic
	TargetTopic string
	Partition   int32
	Source      int64
	Target      int64
	OK          bool
}

// TranslateGroup reads group's committed offsets on the source (src) and
// translates those of mirrored topics with syncs. cfg supplies the topic
// names (Topics, Exclude, aliases); it is validated here.
func TranslateGroup(ctx context.Context, cfg Config, src *kgo.Client, syncs *SyncStore, group string) (GroupTranslation, error) {
	if err := cfg.validate(); err != nil {
		return GroupTranslation{}, err
	}
	return translate(ctx, &cfg, kadm.NewClient(src), syncs, group)
}

func translate(ctx context.Context, cfg *Config, src *kadm.Client, syncs *SyncStore, group string) (GroupTranslation, error) {
	out := GroupTranslation{Group: group}
	resp, err := src.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return out, fmt.Errorf("%w: offsets of group %s: %w", ErrSource, group, err)
	}
	resp.Each(func(o kadm.OffsetResponse) {
		if !cfg.mirrored(o.Topic) || o.At < 0 {
			return
		}
		t := TranslatedOffset{Topic: o.Topic, TargetTopic: cfg.TargetTopic(o.Topic), Partition: o.Partition, Source: o.At, Target: -1}
		t.Target, t.OK = syncs.Translate(o.Topic, o.Partition, o.At)
		if !t.OK {
			t.Target = -1
		}
		out.Offsets = append(out.Offsets, t)
	})
	slices.SortFunc(out.Offsets, func(a, b TranslatedOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out, nil
}

// CommitTranslation commits tr's translated offsets into the target's group
// of the same name (tgt is a client of the target), as MirrorMaker 2's
// sync.group.offsets.enabled does: only when that group has no members
// (consumers there own their offsets), and only offsets that move forward.
// It returns how many partitions it committed.
func CommitTranslation(ctx context.Context, tgt *kgo.Client, tr GroupTranslation) (int, error) {
	return commitTranslation(ctx, kadm.NewClient(tgt), tr)
}

func commitTranslation(ctx context.Context, adm *kadm.Client, tr GroupTranslation) (int, error) {
	described, err := adm.DescribeGroups(ctx, tr.Group)
	if err != nil {
		return 0, fmt.Errorf("%w: describe group %s: %w", ErrTarget, tr.Group, err)
	}
	if d, ok := described[tr.Group]; ok && d.Err == nil && len(d.Members) > 0 {
		return 0, nil // active on the target: its consumers commit
	}
	current, err := adm.FetchOffsets(ctx, tr.Group)
	if err != nil {
		return 0, fmt.Errorf("%w: offsets of group %s: %w", ErrTarget, tr.Group, err)
	}
	var offs kadm.Offsets
	for _, o := range tr.Offsets {
		if !o.OK {
			continue
		}
		if c, ok := current.Lookup(o.TargetTopic, o.Partition); ok && c.Err == nil && c.At >= o.Target {
			continue
		}
		offs.AddOffset(o.TargetTopic, o.Partition, o.Target, -1)
	}
	if len(offs) == 0 {
		return 0, nil
	}
	resp, err := adm.CommitOffsets(ctx, tr.Group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("%w: commit translated offsets of group %s: %w", ErrTarget, tr.Group, err)
	}
	n := 0
	for _, ps := range offs {
		n += len(ps)
	}
	return n, nil
}

// syncGroups translates the source groups matching cfg.SyncGroups and
// commits them into the target's groups.
func (m *Mirror) syncGroups(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	listed, err := m.srcAdm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("%w: list groups: %w", ErrSource, err)
	}
	var groups []string
	for _, g := range slices.Sorted(maps.Keys(listed)) {
		if m.cfg.groups.MatchString(g) && g != m.cfg.Name {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	syncs, err := ReadSyncs(ctx, m.tgt, m.cfg.SyncTopic())
	if err != nil {
		return err
	}
	for _, g := range groups {
		tr, err := translate(ctx, &m.cfg, m.srcAdm, syncs, g)
		if err != nil {
			return err
		}
		n, err := commitTranslation(ctx, m.tgtAdm, tr)
		if err != nil {
			return err
		}
		if n > 0 {
			m.log.Info("mirror: committed translated group offsets on the target", "group", g, "partitions", n)
		}
	}
	return nil
}
