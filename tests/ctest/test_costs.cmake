# The longest tests' costs (seconds, measured: the `ci` tree on 2 cores, ctest -j2), included by
# ctest after the discovered tests (TEST_INCLUDE_FILES, tests/CMakeLists.txt). ctest starts tests
# in descending order of cost, and a fresh tree (every CI run) has no Testing/Temporary/
# CTestCostData.txt to take costs from: it would start these in number order, and the training
# ones (which use both cores for minutes) late, to end beside nothing. A name that is not a test
# of this tree (a build without zeusd, say) is ignored by ctest; CTestCosts.NameTests checks that
# every one is a test of a full build.
set(zeus_test_costs
  FashionMnistAccuracy.ReachesTheTargetOnRealData=130
  FashionMnistExample.PerGpuLimitsUnderZeusRunSpendLessThanOneLimit=97
  Slurm.WholeSuite=86
  FashionMnistExample.RunsUnderZeusRunLegacyLocalRankAndSpawn=60
  LimitsSurvive.EveryWayARunCanDieThenTheNextJobRunsClean=26
  FashionMnistExample.DeviceTypeAndMeasureOnly=25
  FashionMnistExample.ZeusTuneRunsItAndResumesAfterBeingKilled=23
  FashionMnistExample.RunsFromSlurmVariables=14
  ElasticEtcd.AnyNodeAndAnEtcdMemberMayDieAndWithoutEtcdTheLaunchersStopCleanly=14
  ZeusRun.RunsAnUnchangedPyTorchScriptLikeTorchrun=13
  SlurmJobEnergy.ThePrologAndEpilogMeasureAJobAsItsGpusCountersSay=12
  PrometheusScrape.SeesTheFakeGpusPowerLimitsAndAFailingGpu=11
  ZeusdPolicy.ASlowOverrideOnOneGpuDoesNotHoldUpAnother=8
  ZeusdMetrics.EveryDashboardQueryReturnsSeries=7
  PrometheusScrape.SeesAmdGpusThroughAmdSmi=7
  DataLoaderEndToEnd.BadInputFailsBeforeTrainingAndOverwritesNothing=7)
if(NOT ZEUS_TEST_COSTS_LIST_ONLY)
  foreach(entry IN LISTS zeus_test_costs)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 name)
    list(GET entry 1 cost)
    set_tests_properties(${name} PROPERTIES COST ${cost})
  endforeach()
endif()
