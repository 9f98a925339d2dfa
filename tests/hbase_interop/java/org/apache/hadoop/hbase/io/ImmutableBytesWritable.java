// A minimal stand-in for HBase's ImmutableBytesWritable, so that Hadoop's own readers can
// instantiate the key class these files name without HBase on the classpath. Its wire form is
// HBase's: int32 length, then the bytes. It orders keys as HBase does: unsigned bytes, a
// proper prefix first.
package org.apache.hadoop.hbase.io;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import org.apache.hadoop.io.WritableComparable;

public class ImmutableBytesWritable implements WritableComparable<ImmutableBytesWritable> {
  private byte[] bytes = new byte[0];

  public ImmutableBytesWritable() {}

  public byte[] get() {
    return bytes;
  }

  public void set(byte[] b) {
    bytes = b;
  }

  @Override
  public void readFields(DataInput in) throws IOException {
    int len = in.readInt();
    if (len < 0) {
      throw new IOException("negative ImmutableBytesWritable length " + len);
    }
    bytes = new byte[len];
    in.readFully(bytes);
  }

  @Override
  public void write(DataOutput out) throws IOException {
    out.writeInt(bytes.length);
    out.write(bytes);
  }

  @Override
  public int compareTo(ImmutableBytesWritable o) {
    int n = Math.min(bytes.length, o.bytes.length);
    for (int i = 0; i < n; i++) {
      int a = bytes[i] & 0xff, b = o.bytes[i] & 0xff;
      if (a != b) {
        return a - b;
      }
    }
    return bytes.length - o.bytes.length;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ImmutableBytesWritable && compareTo((ImmutableBytesWritable) o) == 0;
  }

  @Override
  public int hashCode() {
    return java.util.Arrays.hashCode(bytes);
  }
}
