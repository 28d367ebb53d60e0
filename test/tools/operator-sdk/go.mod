// Module operator-sdk pins the operator-sdk v0.0.7 command-line tool (commands/operator-sdk)
// that test/scripts/build-tools.sh builds for the guide's own commands (`operator-sdk build`,
// `operator-sdk generate k8s`). The CLI imports controller-runtime v0.1.4 (pkg/test, `up local`),
// which does not compile with the libraries the operator's module resolves, so it has a module
// of its own, pinned to what operator-sdk v0.0.7's Gopkg.lock and controller-runtime v0.1.4's
// Gopkg.lock pinned. Exceptions: golang.org/x/sys is today's (the Go proxy serves neither lock's
// commit), json-iterator and reflect2 are today's (reflect2 1.0.1 breaks at run time on
// Go >= 1.18), and gofuzz is v1.0.0, which json-iterator 1.1.12 requires.
module github.com/example-inc/memcached-operator/test/tools/operator-sdk

go 1.26.3

require github.com/operator-framework/operator-sdk v0.0.7

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/ghodss/yaml v1.0.0 // indirect
	github.com/go-logr/logr v0.1.0 // indirect
	github.com/go-logr/zapr v0.1.0 // indirect
	github.com/gogo/protobuf v1.1.1 // indirect
	github.com/golang/glog v0.0.0-20160126235308-23def4e6c14b // indirect
	github.com/golang/groupcache v0.0.0-20180513044358-24b0969c4cb7 // indirect
	github.com/golang/protobuf v1.2.0 // indirect
	github.com/google/btree v1.0.0 // indirect
	github.com/google/gofuzz v1.0.0 // indirect
	github.com/google/uuid v1.0.0 // indirect
	github.com/googleapis/gnostic v0.2.0 // indirect
	github.com/gregjones/httpcache v0.0.0-20180305231024-9cad4c3443a7 // indirect
	github.com/hashicorp/golang-lru v0.5.0 // indirect
	github.com/hpcloud/tail v1.0.0 // indirect
	github.com/imdario/mergo v0.3.6 // indirect
	github.com/inconshreveable/mousetrap v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/mattbaird/jsonpatch v0.0.0-20171005235357-81af80346b1a // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/mxk/go-flowrate v0.0.0-20140419014527-cca7078d478f // indirect
	github.com/onsi/ginkgo v1.6.0 // indirect
	github.com/onsi/gomega v1.4.1 // indirect
	github.com/pborman/uuid v1.2.0 // indirect
	github.com/peterbourgon/diskv v2.0.1+incompatible // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/sergi/go-diff v1.0.0 // indirect
	github.com/sirupsen/logrus v1.0.6 // indirect
	github.com/spf13/cobra v0.0.3 // indirect
	github.com/spf13/pflag v1.0.2 // indirect
	go.uber.org/atomic v1.3.2 // indirect
	go.uber.org/multierr v1.1.0 // indirect
	go.uber.org/zap v1.9.1 // indirect
	golang.org/x/crypto v0.0.0-20180910181607-0e37d006457b // indirect
	golang.org/x/net v0.0.0-20180925072008-f04abc6bdfa7 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.3.0 // indirect
	golang.org/x/time v0.0.0-20180412165947-fbb02b2291d2 // indirect
	gopkg.in/airbrake/gobrake.v2 v2.0.9 // indirect
	gopkg.in/fsnotify.v1 v1.4.7 // indirect
	gopkg.in/gemnasium/logrus-airbrake-hook.v2 v2.1.2 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
	gopkg.in/yaml.v2 v2.2.1 // indirect
	k8s.io/api v0.0.0-20180712090710-2d6f90ab1293 // indirect
	k8s.io/apiextensions-apiserver v0.0.0-20180808065829-408db4a50408 // indirect
	k8s.io/apimachinery v0.0.0-20180621070125-103fd098999d // indirect
	k8s.io/client-go v0.0.0-20180806134042-1f13a808da65 // indirect
	k8s.io/kube-openapi v0.0.0-20180731170545-e3762e86a74c // indirect
	sigs.k8s.io/controller-runtime v0.1.4 // indirect
	sigs.k8s.io/testing_frameworks v0.0.0-20180419181259-f53464b8b84b // indirect
)
