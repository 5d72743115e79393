/* The rendezvous store's keys, in one place: the launcher and every rank read and write them, so
 * they are spelled once. Each is a printf format.
 *   hvds/<job>/...      live for the whole job; the launcher watches them;
 *   <job>/g<gen>/...    belong to one init of the runtime (gen counts inits in the process), so
 *                       a re-init never reads a key of the one before;
 *   <job>/...           the runtime's own, across inits (fault reports). */
#ifndef HVDS_STORE_KEYS_H_
#define HVDS_STORE_KEYS_H_

/* Job keys (job id). */
#define HVDS_KEY_ARRIVED "hvds/%s/arrived"         /* counter: ranks that reached rendezvous */
#define HVDS_KEY_ARRIVED_RANK "hvds/%s/arrived/%d" /* job, rank: that rank arrived */
#define HVDS_KEY_FAILED "hvds/%s/failed"           /* the launcher's record of a failed worker */
#define HVDS_KEY_SILENT "hvds/%s/silent" /* a rank its peers found unresponsive (fault_cause.c) */
#define HVDS_KEY_STOP_COUNT "hvds/%s/stop_count"   /* ranks that stopped with a reason */
#define HVDS_KEY_STOP_FIRST "hvds/%s/stop_first"   /* the first one's words */
#define HVDS_KEY_SERVING "hvds/%s/serving"         /* the generation rank 0's own store serves */
#define HVDS_KEY_SERVED "hvds/%s/g%d/%s"           /* job, gen, what: rank 0's store's keys */
/* job, membership, worker id (host:slot): that worker read that elastic membership */
#define HVDS_KEY_ELASTIC_READ "hvds/%s/elastic/e%lld/read/%s"

/* Generation keys (job id, generation). */
#define HVDS_KEY_GEN "%s/g%d"                          /* the prefix of one init's keys */
#define HVDS_KEY_GEN_WORLD "%s/g%d/world"              /* the world transport's rendezvous */
#define HVDS_KEY_GEN_SHM "%s/g%d/shm/%s"               /* job, gen, host: a host's segment */
#define HVDS_KEY_GEN_STOP_COUNT "%s/g%d/stop_count"
#define HVDS_KEY_GEN_STOP_FIRST "%s/g%d/stop_first"

/* Under a generation's prefix (HVDS_KEY_GEN): what each rank saw of a failure (fault_cause.c). */
#define HVDS_KEY_BLAME "%s/blame/%d"       /* prefix, rank: the peer it blames and how */
#define HVDS_KEY_TIMEOUTS "%s/timeouts/%d" /* prefix, peer: ranks that timed out on that peer */
#define HVDS_KEY_REPORTED "%s/reported"    /* prefix: ranks that reported */

/* The runtime's fault reports (job id). */
#define HVDS_KEY_FAULT "%s/fault"
#define HVDS_KEY_FAULT_COUNT "%s/fault_count"

#endif /* HVDS_STORE_KEYS_H_ */
