package main

// weir acl: add, remove and list ACLs through CreateAcls, DeleteAcls and
// DescribeAcls, with kafka-acls' flag names; and the broker's authorizer
// settings (--authorizer, --super-users, --allow-everyone-if-no-acl-found).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/transport/broker"
)

// errACL: the broker refused an ACL request (or a part of it).
var errACL = errors.New("acl")

// authorizerNames are the --authorizer values that turn the authorizer on.
var authorizerNames = []string{"acl", "kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}

// authorizer is the broker's authorizer config from the settings; nil when
// --authorizer is empty.
func (s brokerSettings) authorizer() (*acl.Config, error) {
	if s.Authorizer == "" {
		if s.SuperUsers != "" || s.AllowEveryoneIfNoACLFound {
			return nil, fmt.Errorf("%w --super-users and --allow-everyone-if-no-acl-found need --authorizer acl", errBadFlag)
		}
		return nil, nil
	}
	for _, n := range authorizerNames {
		if s.Authorizer == n {
			return &acl.Config{SuperUsers: acl.ParseSuperUsers(s.SuperUsers), AllowEveryoneIfNoACLFound: s.AllowEveryoneIfNoACLFound}, nil
		}
	}
	return nil, fmt.Errorf("%w --authorizer %q: want acl (or one of %s)", errBadFlag, s.Authorizer, strings.Join(authorizerNames[1:], ", "))
}

// aclFlags are the resource, principal and operation flags of weir acl.
type aclFlags struct {
	brokers         string
	timeout         time.Duration
	topic, group    string
	transactionalID string
	cluster         bool
	patternType     string
	allow, deny     []string
	hosts           []string
	operations      []string
	principal       string // list only
}

func (f *aclFlags) add(fs *pflag.FlagSet, list bool) {
	fs.StringVarP(&f.brokers, "brokers", "b", broker.DefaultListen, "comma-separated `host:port` list of brokers to bootstrap from")
	fs.DurationVar(&f.timeout, "timeout", defaultClientTimeout, "give up when the broker does not answer within this long")
	fs.StringVar(&f.topic, "topic", "", "the topic `name` (or prefix, with --resource-pattern-type prefixed; * for every topic)")
	fs.StringVar(&f.group, "group", "", "the consumer group `name` (or prefix; * for every group)")
	fs.StringVar(&f.transactionalID, "transactional-id", "", "the transactional `id` (or prefix; * for every id)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	patternHelp := "`literal` or prefixed"
	if list {
		patternHelp = "`type` of the patterns listed or removed: literal, prefixed, any (the exact name, any type) or match (every pattern that applies to the name) (default any)"
	}
	fs.StringVar(&f.patternType, "resource-pattern-type", "", patternHelp)
	fs.StringArrayVar(&f.allow, "allow-principal", nil, "`principal` (User:alice, User:* for everyone) the ACL allows; repeatable")
	fs.StringArrayVar(&f.deny, "deny-principal", nil, "`principal` the ACL denies; repeatable")
	fs.StringArrayVar(&f.hosts, "host", nil, "client `ip` the ACL applies to; repeatable (default * when adding: every host)")
	fs.StringArrayVar(&f.operations, "operation", nil, "`operation`: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens; repeatable or comma-separated")
	if list {
		fs.StringVar(&f.principal, "principal", "", "list only the ACLs of this `principal` (default: every principal)")
	}
}

// resource returns the resource type and name given (ResourceAny and nil
// when none is given, which only list and remove accept).
func (f *aclFlags) resource() (acl.ResourceType, *string, error) {
	var (
		t     acl.ResourceType = acl.ResourceAny
		name  *string
		given int
	)
	for _, r := range []struct {
		v  string
		rt acl.ResourceType
	}{{f.topic, acl.ResourceTopic}, {f.group, acl.ResourceGroup}, {f.transactionalID, acl.ResourceTransactionalID}} {
		if r.v != "" {
			t, name, given = r.rt, &r.v, given+1
		}
	}
	if f.cluster {
		cn := acl.ClusterName
		t, name, given = acl.ResourceCluster, &cn, given+1
	}
	if given > 1 {
		return 0, nil, fmt.Errorf("%w: give one of --topic, --group, --transactional-id, --cluster", errBadFlag)
	}
	return t, name, nil
}

func (f *aclFlags) ops(def acl.Operation) ([]acl.Operation, error) {
	var ops []acl.Operation
	for _, o := range f.operations {
		for _, s := range strings.Split(o, ",") {
			op, err := acl.ParseOperation(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("%w --operation: %w", errBadFlag, err)
			}
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		if def == acl.OpUnknown {
			return nil, fmt.Errorf("%w --operation: at least one is required", errBadFlag)
		}
		ops = []acl.Operation{def}
	}
	return ops, nil
}

func (f *aclFlags) seeds() ([]string, error) {
	var seeds []string
	for _, b := range strings.Split(f.brokers, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, fmt.Errorf("%w -b %q: want host:port[,host:port...]", errBadFlag, f.brokers)
		}
		seeds = append(seeds, b)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w -b: no broker given", errBadFlag)
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("%w --timeout %v: want a positive duration", errBadFlag, f.timeout)
	}
	return seeds, nil
}

// request sends req to the cluster.
func (f *aclFlags) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	seeds, err := f.seeds()
	if err != nil {
		return nil, err
	}
	c, err := newConn(seeds, f.timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	return resp, nil
}

func newACLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, remove and list ACLs (the broker needs --authorizer acl)",
		Long: `Manage the ACLs of a broker run with --authorizer acl, through Kafka's
CreateAcls, DeleteAcls and DescribeAcls, with kafka-acls' flag names. The
ACLs are stored in the coordination store in Kafka's ZooKeeper layout and
enforced by every broker. Principals are "User:<name>" (User:* for
everyone); operations and resource pattern types are Kafka's.`,
	}
	cmd.AddCommand(newACLAddCmd(), newACLRemoveCmd(), newACLListCmd())
	return cmd
}

func newACLAddCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add ACLs: every principal given gets every operation given on the resource",
		Example: `  weir acl add --topic orders --allow-principal User:alice --operation Read,Describe
  weir acl add --topic logs- --resource-pattern-type prefixed --allow-principal User:* --operation Write
  weir acl add --group billing --allow-principal User:alice --operation Read
  weir acl add --cluster --allow-principal User:admin --operation All
  weir acl add --topic secret --deny-principal User:* --host 10.0.0.7 --operation All`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, name, err := f.resource()
			if err != nil {
				return err
			}
			if name == nil {
				return fmt.Errorf("%w: a resource is required: --topic, --group, --transactional-id or --cluster", errBadFlag)
			}
			pt := acl.PatternLiteral
			if f.patternType != "" {
				if pt, err = acl.ParsePatternType(f.patternType); err != nil || (pt != acl.PatternLiteral && pt != acl.PatternPrefixed) {
					return fmt.Errorf("%w --resource-pattern-type %q: want literal or prefixed", errBadFlag, f.patternType)
				}
			}
			ops, err := f.ops(acl.OpUnknown)
			if err != nil {
				return err
			}
			if len(f.allow)+len(f.deny) == 0 {
				return fmt.Errorf("%w: give --allow-principal or --deny-principal", errBadFlag)
			}
			hosts := f.hosts
			if len(hosts) == 0 {
				hosts = []string{acl.WildcardHost}
			}
			req := kmsg.NewPtrCreateACLsRequest()
			var bs []acl.Binding
			for _, perm := range []struct {
				who []string
				p   acl.Permission
			}{{f.allow, acl.Allow}, {f.deny, acl.Deny}} {
				for _, who := range perm.who {
					for _, h := range hosts {
						for _, op := range ops {
							b := acl.Binding{Pattern: acl.Pattern{Type: t, Pattern: pt, Name: *name},
								Entry: acl.Entry{Principal: who, Host: h, Operation: op, Permission: perm.p}}
							if err := b.Validate(); err != nil {
								return fmt.Errorf("%w: %w", errBadFlag, err)
							}
							bs = append(bs, b)
							c := kmsg.NewCreateACLsRequestCreation()
							c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(t), *name, kmsg.ACLResourcePatternType(pt)
							c.Principal, c.Host = who, h
							c.Operation, c.PermissionType = kmsg.ACLOperation(op), kmsg.ACLPermissionType(perm.p)
							req.Creations = append(req.Creations, c)
						}
					}
				}
			}
			resp, err := f.request(cmd.Context(), req)
			if err != nil {
				return err
			}
			var errs []error
			for i, r := range resp.(*kmsg.CreateACLsResponse).Results {
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("%w: adding %s: %w%s", errACL, bs[i], err, message(r.ErrorMessage)))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "added %s\n", bs[i])
			}
			return errors.Join(errs...)
		},
	}
	f.add(cmd.Flags(), false)
	return cmd
}

func message(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

// filter builds the DescribeAcls/DeleteAcls filter of the flags.
func (f *aclFlags) filter() (acl.Filter, error) {
	t, name, err := f.resource()
	if err != nil {
		return acl.Filter{}, err
	}
	fl := acl.Filter{Type: t, Name: name, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	if f.patternType != "" {
		if fl.Pattern, err = acl.ParsePatternType(f.patternType); err != nil {
			return fl, fmt.Errorf("%w --resource-pattern-type: %w", errBadFlag, err)
		}
	}
	ops, err := f.ops(acl.OpAny)
	if err != nil {
		return fl, err
	}
	if len(ops) > 1 {
		return fl, fmt.Errorf("%w --operation: give at most one to filter on", errBadFlag)
	}
	fl.Operation = ops[0]
	switch {
	case len(f.allow)+len(f.deny) > 1:
		return fl, fmt.Errorf("%w: give at most one --allow-principal or --deny-principal to filter on", errBadFlag)
	case len(f.allow) == 1:
		fl.Principal, fl.Permission = &f.allow[0], acl.Allow
	case len(f.deny) == 1:
		fl.Principal, fl.Permission = &f.deny[0], acl.Deny
	case f.principal != "":
		fl.Principal = &f.principal
	}
	if len(f.hosts) > 1 {
		return fl, fmt.Errorf("%w --host: give at most one to filter on", errBadFlag)
	}
	if len(f.hosts) == 1 {
		fl.Host = &f.hosts[0]
	}
	return fl, nil
}

func newACLRemoveCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove the ACLs the flags select (unset flags select everything)",
		Example: `  weir acl remove --topic orders --allow-principal User:alice --operation Read
  weir acl remove --topic orders                 # every ACL of the literal topic orders
  weir acl remove --topic orders --resource-pattern-type match   # and those of wildcards and prefixes that apply to it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, err := f.filter()
			if err != nil {
				return err
			}
			if fl.Type == acl.ResourceAny && fl.Principal == nil {
				return fmt.Errorf("%w: name a resource or a principal (refusing to remove every ACL)", errBadFlag)
			}
			req := kmsg.NewPtrDeleteACLsRequest()
			df := kmsg.NewDeleteACLsRequestFilter()
			df.ResourceType, df.ResourceName, df.ResourcePatternType = kmsg.ACLResourceType(fl.Type), fl.Name, kmsg.ACLResourcePatternType(fl.Pattern)
			df.Principal, df.Host = fl.Principal, fl.Host
			df.Operation, df.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
			req.Filters = append(req.Filters, df)
			resp, err := f.request(cmd.Context(), req)
			if err != nil {
				return err
			}
			r := resp.(*kmsg.DeleteACLsResponse).Results[0]
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("%w: remove: %w%s", errACL, err, message(r.ErrorMessage))
			}
			var bs []acl.Binding
			for _, m := range r.MatchingACLs {
				bs = append(bs, acl.Binding{
					Pattern: acl.Pattern{Type: acl.ResourceType(m.ResourceType), Pattern: acl.PatternType(m.ResourcePatternType), Name: m.ResourceName},
					Entry: acl.Entry{Principal: m.Principal, Host: m.Host, Operation: acl.Operation(m.Operation),
						Permission: acl.Permission(m.PermissionType)}})
			}
			for _, b := range bs {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", b)
			}
			if len(bs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no ACL matched")
			}
			return nil
		},
	}
	f.add(cmd.Flags(), true)
	return cmd
}

func newACLListCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the ACLs the flags select (unset flags select everything)",
		Example: `  weir acl list
  weir acl list --topic orders --resource-pattern-type match   # every ACL that applies to topic orders
  weir acl list --principal User:alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, err := f.filter()
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceType(fl.Type), fl.Name, kmsg.ACLResourcePatternType(fl.Pattern)
			req.Principal, req.Host = fl.Principal, fl.Host
			req.Operation, req.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
			resp, err := f.request(cmd.Context(), req)
			if err != nil {
				return err
			}
			r := resp.(*kmsg.DescribeACLsResponse)
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("%w: list: %w%s", errACL, err, message(r.ErrorMessage))
			}
			return printACLs(cmd.OutOrStdout(), r)
		},
	}
	f.add(cmd.Flags(), true)
	return cmd
}

// printACLs prints one line per binding, sorted, in columns.
func printACLs(w io.Writer, r *kmsg.DescribeACLsResponse) error {
	var rows [][]string
	for _, res := range r.Resources {
		for _, e := range res.ACLs {
			rows = append(rows, []string{acl.ResourceType(res.ResourceType).String(), acl.PatternType(res.ResourcePatternType).String(),
				res.ResourceName, e.Principal, e.Host, acl.Operation(e.Operation).String(), acl.Permission(e.PermissionType).String()})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return strings.Join(rows[i], "\x00") < strings.Join(rows[j], "\x00") })
	rows = append([][]string{{"TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"}}, rows...)
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		var sb strings.Builder
		for i, c := range row {
			if i < len(row)-1 {
				fmt.Fprintf(&sb, "%-*s  ", width[i], c)
			} else {
				sb.WriteString(c)
			}
		}
		if _, err := fmt.Fprintln(w, sb.String()); err != nil {
			return err
		}
	}
	return nil
}
