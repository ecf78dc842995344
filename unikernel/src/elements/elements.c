/* fluidvim VNF — the element classes: name, configure, initialize, push, stats. The parser looks
 * classes up here by name (click_parse.c), the data path calls push and the stats reply calls
 * stats (click.c). The order is enum eclass's (click_internal.h). */
#include "elements.h"

const struct element_class click_elements[EC_NCLASSES] = {
	[EC_FROMDEVICE]   = { "FromDevice",   fromdevice_configure,   NULL,                   fromdevice_push,   NULL },
	[EC_TODEVICE]     = { "ToDevice",     todevice_configure,     NULL,                   todevice_push,     NULL },
	[EC_COUNTER]      = { "Counter",      counter_configure,      NULL,                   counter_push,      counter_stats },
	[EC_CLASSIFIER]   = { "Classifier",   classifier_configure,   NULL,                   classifier_push,   classifier_stats },
	[EC_IPFILTER]     = { "IPFilter",     ipfilter_configure,     NULL,                   ipfilter_push,     ipfilter_stats },
	[EC_QUEUE]        = { "Queue",        queue_configure,        queue_initialize,       queue_push,        queue_stats },
	[EC_RATELIMITER]  = { "RateLimiter",  ratelimiter_configure,  ratelimiter_initialize, ratelimiter_push,  ratelimiter_stats },
	[EC_ETHERMIRROR]  = { "EtherMirror",  ethermirror_configure,  NULL,                   ethermirror_push,  ethermirror_stats },
	[EC_DISCARD]      = { "Discard",      discard_configure,      NULL,                   discard_push,      discard_stats },
	[EC_ARPRESPONDER] = { "ARPResponder", arpresponder_configure, NULL,                   arpresponder_push, arpresponder_stats },
};
