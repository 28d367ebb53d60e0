package memcached

// The tests of package memcached are in package memcached_test, so that they
// can share the fixtures of memcachedtest, which builds on this package.
// These names give them the unexported rules and limits they check.

var (
	AvailableCondition   = availableCondition
	CacheMB              = cacheMB
	DegradedCondition    = degradedCondition
	ItemLockPower        = itemLockPower
	NewCondition         = newCondition
	ProgressingCondition = progressingCondition
	SetCondition         = setCondition
)

const (
	ConnLimitPattern         = connLimitPattern
	ConnsPerThread           = connsPerThread
	DefaultCacheMB           = defaultCacheMB
	DefaultItemBytes         = defaultItemBytes
	DefaultThreads           = defaultThreads
	ExtraArgPattern          = extraArgPattern
	HashpowerPattern         = hashpowerPattern
	MaxConnLimit             = maxConnLimit
	MaxItemBytes             = maxItemBytes
	Mebibyte                 = mebibyte
	MemcachedOverheadMB      = memcachedOverheadMB
	MemcachedPort            = memcachedPort
	MemcachedUID             = memcachedUID
	MetricsPort              = metricsPort
	MinMemoryLimit           = minMemoryLimit
	MetricsPortName          = metricsPortName
	MsgAuthProtocol          = msgAuthProtocol
	MsgConnLimit             = msgConnLimit
	MsgConnsPerThread        = msgConnsPerThread
	MsgHashpower             = msgHashpower
	MsgHashpowerThreads      = msgHashpowerThreads
	MsgItemSize              = msgItemSize
	MsgItemSizeFits          = msgItemSizeFits
	MsgProtocol              = msgProtocol
	MsgThreads               = msgThreads
	MsgTolerationExistsValue = msgTolerationExistsValue
	MsgTolerationKeyless     = msgTolerationKeyless
	MsgTolerationSeconds     = msgTolerationSeconds
	PreStopSleepSeconds      = preStopSleepSeconds
	ProtocolPattern          = protocolPattern
	SlabChunkBytes           = slabChunkBytes
	TerminationGracePeriod   = terminationGracePeriod
	ThreadsPattern           = threadsPattern
)

var Project = project
