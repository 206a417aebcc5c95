/**
 * The part of cluster-key-slot (ioredis's own slot function, CommonJS) the delivery queue uses:
 * its bundled declaration is an ambient module that NodeNext resolution does not pick up.
 */
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot (0–16383) of a key, honouring a `{hash tag}`. */
  function calculateSlot(key: string | Buffer): number;
  export default calculateSlot;
}
