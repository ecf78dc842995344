/* fluidvim VNF — the element classes, one line each (an X-macro list, read without include guard
 * by every user that defines ELEMENT first): ELEMENT(ENUM, Name, file) is the value EC_ENUM of
 * enum eclass, the class Name of the config language and its one file elements/<file>.c, which
 * defines <file>_ops (ELEMENT_OPS, elements.h). Generated from this list: enum eclass
 * (click_internal.h), the table click_elements (elements.c) and the class names in the parser's
 * messages (click_parse.c). The order is the enum's. A new element class = its file + its line. */
ELEMENT(FROMDEVICE,   FromDevice,   fromdevice)
ELEMENT(TODEVICE,     ToDevice,     todevice)
ELEMENT(COUNTER,      Counter,      counter)
ELEMENT(CLASSIFIER,   Classifier,   classifier)
ELEMENT(IPFILTER,     IPFilter,     ipfilter)
ELEMENT(QUEUE,        Queue,        queue)
ELEMENT(RATELIMITER,  RateLimiter,  ratelimiter)
ELEMENT(ETHERMIRROR,  EtherMirror,  ethermirror)
ELEMENT(DISCARD,      Discard,      discard)
ELEMENT(ARPRESPONDER, ARPResponder, arpresponder)
ELEMENT(FASTUDPFLOWS, FastUDPFlows, fastudpflows)
ELEMENT(TIMESTAMPDIFF, TimestampDiff, timestampdiff)
