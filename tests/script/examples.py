"""Example scripts from the Netesto paper and README (keywords de-mangled), for tests."""

LIB = """\
# A small macro library in the shape of inlib (the paper's two macros).
SET randDelay=0.1

BEGIN TwoFlowBaseStream
SET exp=COUNTER
IF_DEF preServer: RUN preServer host=$server
DO_SERVER exp=$exp host=$server \\
   expName=$expName order=0 start=1
IF_DEF preClient: RUN preClient \\
   host=$client1
IF $tcpDump: DO_TCPDUMP host=$client1 \\
   server=$server packets=$tcpDump
DO_CLIENT host=$client1 server=$server \\
  ca=$ca1 dur=$dur1 delay=0 \\
  instances=$instances test=TCP_STREAM stats=1
RAND_WAIT $randDelay
IF_DEF preClient: RUN preClient host=$client2
IF $tcpDump: DO_TCPDUMP host=$client2 \\
   server=$server packets=$tcpDump
DO_CLIENT host=$client2 server=$server \\
   ca=$ca2 dur=$dur2 delay=$delay2 \\
   instances=$instances test=TCP_STREAM \\
   stats=1
WAIT $dur1
WAIT 10
DO_SERVER host=$server order=1
WAIT 5
GET_DATA host=$client1
GET_DATA host=$client2
GET_DATA host=$server
WAIT 10
PROCESS_EXP
WAIT 15
END TwoFlowBaseStream

BEGIN MServerRR
SET exp=COUNTER
FOR s IN $servers DO
  IF_DEF preServer: RUN preServer host=$s
  DO_SERVER exp=$exp host=$s order=0 \\
     expName=$expName start=1
  SET exp=PREV
DONE
FOR c IN $clients DO
  IF_DEF preClient: RUN preClient host=$c
 FOR s IN $servers DO
    IF $tcpDump: DO_TCPDUMP host=$c \\
       server=$s packets=$tcpDump
    FOR r IN $reqs DO
      DO_CLIENT host=$c server=$s ca=$ca \\
         dur=$dur delay=0 test=TCP_RR \\
         instances=$instances req=$r \\
         reply=$reply stats=1
      RAND_WAIT $randDelay
    DONE
  DONE
DONE
WAIT $dur
WAIT 10
FOR s IN $servers DO
 DO_SERVER host=$s order=1
DONE
WAIT 5
FOR s IN $servers DO
 GET_DATA host=$s
DONE
FOR c IN $clients DO
 GET_DATA host=$c
DONE
WAIT 10
PROCESS_EXP
WAIT 15
END MServerRR
"""

PAPER_SAMPLE = """\
# Sample Netesto test script
# Run two flow stream test

HOST_SUFFIX mynetwork.com
SOURCE lib
SET dur=60
SET_EXP dur2=dur/3
SET_EXP delay2=$dur2+3
SET server=host1
SET client1=host2
SET client2=host3
SET ca=bbr
SET instances=1

RUN TwoFlowBaseStream,1 server=$server \\
client1=$client1 client2=$client2 \\
expName=1s2clfs ca1=$ca ca2=$ca dur1=$dur \\
dur2=$dur2 delay2=$delay2
END
"""

PAPER_MSERVERRR = """\
SOURCE lib
RUN MServerRR servers=host1,host2 \\
expName=2s3c3fr clients=host2,host3,host4 \\
ca=cubic reqs=10K,100K,1M reply=1 dur=60 instances=1
"""

README_FOR = """\
SET clients=c1,c2,c3
SET servers=s1
SET ca=cubic
SET dur=30
SET instances=2
SET req=1M
SET reply=1
SET randDelay=0.2
FOR c in $clients DO
  FOR s in $servers DO
    DO_CLIENT host=$c server=$s ca=$ca dur=$dur delay=0 instances=$instances \\
    test=TCP_RR req=$req reply=$reply stats=1
    RAND_WAIT $randDelay
  DONE
DONE
SET tcpDump=1000
IF $tcpDump: DO_TCPDUMP host=c1 server=s1 packets=$tcpDump
"""

MISC = """\
BEGIN_COMMENT
free text ignored
END_COMMENT
SET bw=100mbit
DESC sweep of $bw
OTHER bw=$bw,netem=10
SET_QDISC host=router qdisc=tbf rate=$bw burst=32k limit=100kb
SET_NETEM host=router netem_delay=10 loss=0.1
SET_SYSCTL host=h1 net.ipv4.tcp_wmem=10000,262144,20971520
SET_MODULE_PARAMS host=h1 module=tcp_cubic hystart=0
FOR i IN 1..3 DO
  SET_EXP d=$i*2
  DO_CLIENT host=h1 server=h2 test=UDP_STREAM rate=10M dur=$d exp=COUNTER
  WAIT $d
DONE
ECHO done
NEXT_COUNTER
"""

SCRIPTS = {
    "paper_sample": PAPER_SAMPLE,
    "paper_mserverrr": PAPER_MSERVERRR,
    "readme_for": README_FOR,
    "misc": MISC,
    "lib": LIB,
}
