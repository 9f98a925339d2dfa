// A stand-in for HBase's Result: Export files name this class as their value class, and
// Hadoop's SequenceFile.Reader looks it up by name. It keeps the bytes of one length-delimited
// protobuf message (varint length included) as HBase's ResultSerialization reads them; the
// Python side decodes them with HBase's own Client.proto.
package org.apache.hadoop.hbase.client;

public class Result {
  private byte[] message = new byte[0];

  public byte[] message() {
    return message;
  }

  public void setMessage(byte[] m) {
    message = m;
  }
}
