! MPI_Reduce_scatter_block and MPI_Reduce_scatter of MPI_REAL through `use mpi_f08` (bindings
! mpi_reduce_scatter_block_f08_ and mpi_reduce_scatter_f08_) or, built without USE_MPI_F08,
! `use mpi` (mpi_reduce_scatter_block_ and mpi_reduce_scatter_): not in place, in place, uneven
! counts with a zero. Integer values, so the sums are exact in any order and checked
! against a double precision sum computed here. Interception is checked from outside, through the
! OPTIREDUCE_REPORT file (4 reduce-scatters per rank).
program reduce_scatter_check
#ifdef USE_MPI_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer, parameter :: block = 50021
  real, allocatable :: send(:), recv(:)
  double precision, allocatable :: want(:)
  integer, allocatable :: counts(:)
  integer :: ierr, rank, nranks, total, first, p

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  allocate(counts(nranks))

  counts = block
  call run(.false., .true., 'MPI_Reduce_scatter_block, not in place')
  call run(.true., .true., 'MPI_Reduce_scatter_block, MPI_IN_PLACE')
  do p = 1, nranks
    counts(p) = 7001 * p
  end do
  counts(2) = 0
  call run(.false., .false., 'MPI_Reduce_scatter, uneven counts with a zero')
  call run(.true., .false., 'MPI_Reduce_scatter, uneven counts with a zero, MPI_IN_PLACE')

  if (rank == 0) print '(a, i0, a)', 'reduce_scatter: PASS on ', nranks, ' ranks'
  call MPI_Finalize(ierr)

contains

  real function value_of(r, i)
    integer, intent(in) :: r, i
    value_of = real(mod(i * 7 + r * 13, 1000) - 500)
  end function value_of

  subroutine run(in_place, block_form, what)
    logical, intent(in) :: in_place, block_form
    character(len=*), intent(in) :: what
    integer :: i, r, bad
    total = sum(counts)
    first = sum(counts(1:rank))
    allocate(send(total), recv(max(total, 1)), want(counts(rank + 1)))
    do i = 1, total
      send(i) = value_of(rank, i)
    end do
    want = 0
    do i = 1, counts(rank + 1)
      do r = 0, nranks - 1
        want(i) = want(i) + dble(value_of(r, first + i))
      end do
    end do
    ierr = -1
    if (in_place) then
      recv(1:total) = send
      if (block_form) then
        call MPI_Reduce_scatter_block(MPI_IN_PLACE, recv, counts(1), MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      else
        call MPI_Reduce_scatter(MPI_IN_PLACE, recv, counts, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      end if
    else
      recv = -12345.0
      if (block_form) then
        call MPI_Reduce_scatter_block(send, recv, counts(1), MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      else
        call MPI_Reduce_scatter(send, recv, counts, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      end if
    end if
    if (ierr /= MPI_SUCCESS) then
      print '(a, i0, 3a, i0)', 'reduce_scatter [rank ', rank, '] FAIL: ', what, ': ierror ', ierr
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
    bad = count(dble(recv(1:counts(rank + 1))) /= want)
    if (bad /= 0) then
      print '(a, i0, 3a, i0, a)', 'reduce_scatter [rank ', rank, '] FAIL: ', what, ': ', bad, ' wrong elements'
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
    deallocate(send, recv, want)
  end subroutine run

end program reduce_scatter_check
