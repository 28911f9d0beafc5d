package main

// `weir txn list` and `weir txn describe`: the transactions of a cluster,
// as kafka-transactions.sh shows them, through franz-go's kadm
// (ListTransactions to every broker, DescribeTransactions to each id's
// coordinator).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker"
)

// errTxn: listing or describing transactions failed.
var errTxn = errors.New("transactions")

type txnFlags struct {
	brokers string
	timeout time.Duration
	states  []string
	all     bool
}

func newTxnCmd() *cobra.Command {
	var f txnFlags
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions",
		Long: `List the transactional ids of a cluster and describe their transactions
(state, producer id and epoch, timeout, start, partitions), as Kafka's
kafka-transactions.sh does.`,
	}
	list := &cobra.Command{
		Use:   "list [flags]",
		Short: "List the transactional ids with an open transaction (or all, with --all)",
		Example: `  weir txn list
  weir txn list --all
  weir txn list --state PrepareCommit,PrepareAbort`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTxnList(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	list.Flags().StringSliceVar(&f.states, "state", nil, "list only ids in these `states` (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	list.Flags().BoolVar(&f.all, "all", false, "list every transactional id, not only those with a transaction open or completing")
	describe := &cobra.Command{
		Use:     "describe ID...",
		Short:   "Describe the transactions of transactional ids",
		Example: `  weir txn describe orders-etl`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTxnDescribe(cmd.Context(), f, args, cmd.OutOrStdout())
		},
	}
	for _, c := range []*cobra.Command{list, describe} {
		c.Flags().StringVarP(&f.brokers, "brokers", "b", broker.DefaultListen, "comma-separated `host:port` list of brokers to bootstrap from")
		c.Flags().DurationVar(&f.timeout, "timeout", defaultClientTimeout, "give up when the brokers do not answer within this long")
	}
	cmd.AddCommand(list, describe)
	return cmd
}

// admin connects to the brokers of f.
func (f txnFlags) admin() (*kadm.Client, func(), error) {
	var seeds []string
	for _, b := range strings.Split(f.brokers, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, nil, fmt.Errorf("%w -b %q: want host:port[,host:port...]", errBadFlag, f.brokers)
		}
		seeds = append(seeds, b)
	}
	if len(seeds) == 0 {
		return nil, nil, fmt.Errorf("%w -b: no broker given", errBadFlag)
	}
	if f.timeout <= 0 {
		return nil, nil, fmt.Errorf("%w --timeout %v: want a positive duration", errBadFlag, f.timeout)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errTxn, err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// openStates are the states --all is needed to see beyond.
var openStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort"}

func runTxnList(ctx context.Context, f txnFlags, stdout io.Writer) error {
	adm, closeFn, err := f.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	states := f.states
	if len(states) == 0 && !f.all {
		states = openStates
	}
	ls, err := adm.ListTransactions(ctx, nil, states)
	if err != nil && len(ls) == 0 {
		return fmt.Errorf("%w: list: %w", errTxn, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL ID\tPRODUCER ID\tSTATE\tCOORDINATOR")
	for _, t := range ls.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", t.TxnID, t.ProducerID, t.State, t.Coordinator)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: some brokers did not answer: %w", errTxn, err)
	}
	return nil
}

func runTxnDescribe(ctx context.Context, f txnFlags, ids []string, stdout io.Writer) error {
	adm, closeFn, err := f.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	d, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(d) == 0 {
		return fmt.Errorf("%w: describe: %w", errTxn, err)
	}
	var failed []error
	for _, id := range ids {
		t, ok := d[id]
		switch {
		case !ok:
			failed = append(failed, fmt.Errorf("%s: no answer", id))
			continue
		case t.Err != nil:
			failed = append(failed, fmt.Errorf("%s: %w", id, t.Err))
			continue
		}
		start := "-"
		if t.StartTimestamp >= 0 {
			start = time.UnixMilli(t.StartTimestamp).UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(stdout, "transactional id: %s\ncoordinator: %d\nstate: %s\nproducer id: %d\nproducer epoch: %d\ntimeout: %v\nstarted: %s\n",
			t.TxnID, t.Coordinator, t.State, t.ProducerID, t.ProducerEpoch,
			time.Duration(t.TimeoutMillis)*time.Millisecond, start)
		var parts []string
		for _, topic := range slices.Sorted(maps.Keys(t.Topics)) {
			for _, p := range slices.Sorted(maps.Keys(t.Topics[topic])) {
				parts = append(parts, fmt.Sprintf("%s-%d", topic, p))
			}
		}
		fmt.Fprintf(stdout, "partitions: %s\n\n", strings.Join(parts, " "))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %w", errTxn, errors.Join(failed...))
	}
	return nil
}
