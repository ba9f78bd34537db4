declare module 'cluster-key-slot' {
  /** Redis Cluster hash slot (0..16383) of a key, honouring {hash tags}. */
  export default function generate(key: string): number;
}
