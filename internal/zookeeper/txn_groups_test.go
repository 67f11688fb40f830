package zookeeper

import "testing"

// A batch carries siblings in transactions of their own (up to maxTxnGroups),
// sent at once: contenders of one hot lock do not wait a round trip each.
func TestTakeTxnsGroupsSiblings(t *testing.T) {
	var pending []*txnReq
	for range maxTxnGroups + 3 {
		pending = append(pending, &txnReq{key: "/hot", ops: []Op{CreateOp{}}, bytes: 100})
	}
	if got := takeTxns(pending); got != maxTxnGroups {
		t.Errorf("takeTxns = %d, want %d (one create per transaction, %d transactions)", got, maxTxnGroups, maxTxnGroups)
	}
	mixed := []*txnReq{{key: "/a", ops: []Op{CreateOp{}}}, {key: "", ops: []Op{DeleteOp{}}}, {key: "/a", ops: []Op{CreateOp{}}}, {key: "/b", ops: []Op{CreateOp{}}}}
	if got := takeTxns(mixed); got != len(mixed) {
		t.Errorf("takeTxns = %d, want %d", got, len(mixed))
	}
}
