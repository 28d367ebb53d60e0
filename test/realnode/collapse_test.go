package realnode

import "testing"

func TestCollapseElidesRequeues(t *testing.T) {
	in := `time="2026-11-29T19:38:14Z" level=info msg="requirements were not met" csv=a id=KzBOE namespace=m phase=Pending
E1129 19:38:14.843869   25023 queueinformer_operator.go:312] "Unhandled Error" err="sync failed"
time="2026-11-29T19:38:15Z" level=info msg="requirements were not met" csv=a id=WSx9a namespace=m phase=Pending
E1129 19:38:15.843869   25023 queueinformer_operator.go:312] "Unhandled Error" err="sync failed"
time="2026-11-29T19:38:16Z" level=info msg="install strategy successful" csv=a id=QYfH/ namespace=m
`
	want := `level=info msg="requirements were not met" csv=a namespace=m phase=Pending
queueinformer_operator.go:312] "Unhandled Error" err="sync failed"
   ... 2 repeated lines elided
level=info msg="install strategy successful" csv=a namespace=m
`
	if got := collapse(in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
